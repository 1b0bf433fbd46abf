#!/usr/bin/env bash
# A mistyped command or option (issue 51.7) is named, with the closest known name: `perseus plna`
# said "A subcommand is required", `--profil` "The following arguments were not expected".
set -euo pipefail
perseus=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/lib.sh"

expect_error "unknown command 'plna' of 'perseus'; did you mean 'plan'?" plna
expect_error "unknown option '--profil' of 'perseus plan'; did you mean '--profile'?" \
  plan --profil p.csv --microbatches 8
expect_error "unknown option '--microbatchs' of 'perseus plan'; did you mean '--microbatches'?" \
  plan --profile p.csv --microbatchs 8
expect_error "unknown command 'clustr' of 'perseus emulate'; did you mean 'cluster'?" \
  emulate clustr --frontier f
expect_error "unknown option '--fastst' of 'perseus plan export'; did you mean '--fastest'?" \
  plan export --frontier f --fastst
# Nothing close: the choices.
expect_error "unknown command 'bogus' of 'perseus'; the commands are profile, plan," bogus
# A known option's value is not taken for a command or option; a bad value keeps CLI11's reason.
expect_error "Could not convert: --microbatches = x" plan --profile p.csv --microbatches x
echo "did_you_mean: ok"
