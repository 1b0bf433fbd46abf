// Credentials of the control plane (docs/control-plane.md, "Security model"): the cluster token every client
// sends (`Authorization: Bearer <token>`) and the per-job secret that register_job hands out
// (header X-Perseus-Job-Secret) and that the job's own endpoints require. Secrets are stored
// only as SHA-256 digests; comparisons take the same time wherever the texts differ.
#pragma once

#include <string>
#include <string_view>

#include "perseus/wire/protocol.hpp"

namespace perseus::server {

using wire::kJobSecretHeader;

// A new random secret: 32 hex digits from the kernel's random source.
std::string new_secret();
// Lowercase hex SHA-256 of `text`.
std::string sha256_hex(std::string_view text);
// a == b, in time that does not depend on where they differ.
bool same_secret(std::string_view a, std::string_view b);
// The token of an "Authorization: Bearer <token>" header value ("" when it is not one): the
// scheme in any case, one or more spaces before the token (RFC 9110 section 11).
std::string_view bearer_token(std::string_view authorization);

}  // namespace perseus::server
