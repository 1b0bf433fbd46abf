#include "perseus/search/database.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "perseus/util/csv.hpp"
#include "perseus/util/error.hpp"
#include "perseus/util/files.hpp"
#include "perseus/util/text.hpp"

namespace perseus::search {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCollectiveNames[kNumCollectives] = {"all_gather", "all_reduce",
                                                           "reduce_scatter", "all_to_all"};
constexpr const char* kOpColumns[9] = {"op_name",     "forward-compute", "backward-compute",
                                       "input_size",  "output_size",     "weights",
                                       "activations", "fwd_reserved",    "bwd_reserved"};

// One CSV line: its 1-based number and its trimmed fields.
using csv::Row;

void expect_columns(const Row& row, std::size_t n, const std::string& file,
                    const std::string& what) {
  if (row.fields.size() != n) {
    throw Error(located(file, row.line, "",
                        "expected " + std::to_string(n) + " columns (" + what + "), found " +
                            std::to_string(row.fields.size())));
  }
}

// Consumes `lit` from the front of `s`.
bool eat(std::string_view& s, std::string_view lit) {
  if (s.substr(0, lit.size()) != lit) return false;
  s.remove_prefix(lit.size());
  return true;
}

// Consumes a positive decimal integer (no sign, at most 6 digits).
bool eat_int(std::string_view& s, int& out) {
  std::size_t n = 0;
  while (n < s.size() && n < 7 && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 6) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + n, out);
  if (ec != std::errc()) return false;
  s.remove_prefix(n);
  return true;
}

std::vector<double> read_bandwidth(const fs::path& path) {
  const std::string file = path.string();
  std::string text = read_file(path);
  auto rows = csv::rows(text);
  if (rows.size() < 2) {
    throw Error(located(file, 0, "",
                        "expected a header of message sizes and one line of bandwidths (GB/s)"));
  }
  if (rows.size() > 2) {
    throw Error(located(file, rows[2].line, "", "unexpected extra line (expected 2 lines)"));
  }
  const Row& header = rows[0];
  const Row& values = rows[1];
  if (values.fields.size() != header.fields.size()) {
    throw Error(located(file, values.line, "",
                        "expected " + std::to_string(header.fields.size()) +
                            " bandwidths (one per message size in the header), found " +
                            std::to_string(values.fields.size())));
  }
  std::vector<double> out;
  for (std::size_t i = 0; i < values.fields.size(); ++i) {
    std::string column = std::string(header.fields[i]) + " MB";
    double v = csv::Fields(file, values.line).non_negative(values.fields[i], column);
    if (v <= 0.0) throw Error(located(file, values.line, column, "bandwidth must be positive"));
    out.push_back(v);
  }
  return out;
}

}  // namespace

const char* collective_name(Collective c) {
  return kCollectiveNames[static_cast<int>(c)];
}

Database Database::load(const fs::path& dir, const std::string& prefix) {
  if (!fs::is_directory(dir)) {
    throw Error(located(dir.string(), 0, "", "database directory not found"));
  }
  Database db;
  db.dir_ = dir;
  db.prefix_ = prefix;
  std::vector<ProfileFile> profile_files;
  std::vector<CollectiveFile> collective_files;
  db.scan(profile_files, collective_files);
  db.index_sizes(profile_files);
  // The operator list comes from the smallest-microbatch tp1 algo0 file, as in the reference.
  const ProfileFile* base = nullptr;
  for (const auto& f : profile_files) {
    if (f.tp == 1 && f.algo == 0 && (base == nullptr || f.mbs < base->mbs)) base = &f;
  }
  if (base == nullptr) {
    throw Error(
        located(dir.string(), 0, "",
                "no " + prefix + "_mbs<M>_tp1_algo0.csv found (it defines the operator list)"));
  }
  db.read_operator_list(*base);
  for (const auto& f : profile_files) db.read_profiles(f, *base);
  for (const auto& f : collective_files) db.read_collective(f);
  db.read_bandwidths();
  return db;
}

// ---- Loading, step by step ----

void Database::scan(std::vector<ProfileFile>& profiles,
                    std::vector<CollectiveFile>& collectives) const {
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir_)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string name = p.filename().string();
    std::string_view s(name);
    ProfileFile pf{0, 0, 0, p};
    if (eat(s, prefix_) && eat(s, "_mbs") && eat_int(s, pf.mbs) && eat(s, "_tp") &&
        eat_int(s, pf.tp) && eat(s, "_algo") && eat_int(s, pf.algo) && s == ".csv") {
      if (pf.mbs <= 0 || pf.tp <= 0) {
        throw Error(located(p.string(), 0, "", "microbatch size and tp degree must be positive"));
      }
      profiles.push_back(pf);
      continue;
    }
    s = name;
    if (!(eat(s, "prim_") && eat(s, prefix_) && eat(s, "_"))) continue;
    for (int c = 0; c < kNumCollectives; ++c) {
      std::string_view t = s;
      CollectiveFile cf{static_cast<Collective>(c), 0, p};
      if (eat(t, kCollectiveNames[c]) && eat(t, "_") && eat_int(t, cf.num_gpus) &&
          t == "gpus.csv" && cf.num_gpus > 0) {
        collectives.push_back(cf);
        break;
      }
    }
  }
  if (profiles.empty()) {
    // The models whose profiles are there, as --model and --model-size name them.
    std::set<std::string> present;
    for (const auto& p : entries) {
      const std::string name = p.filename().string();
      const std::size_t at = name.find("_mbs");
      if (at != std::string::npos && at > 0 && name.rfind("prim_", 0) != 0 && name.size() > 4 &&
          name.compare(name.size() - 4, 4, ".csv") == 0) {
        present.insert(name.substr(0, at));
      }
    }
    const std::string have = join({present.begin(), present.end()});
    std::string underscored = prefix_;  // "gpt_1.3B" -> "gpt_1_3B", as the file names write it
    std::replace(underscored.begin(), underscored.end(), '.', '_');
    const std::string hint =
        underscored != prefix_ && present.count(underscored)
            ? " (profile names write the size with '_' for '.': " + underscored + ")"
            : " (--model NAME --model-size SIZE name NAME_SIZE)";
    throw Error(located(dir_.string(), 0, "",
                        "no operator profiles " + prefix_ + "_mbs<M>_tp<T>_algo<A>.csv found" +
                            (have.empty() ? std::string("; it holds none")
                                          : "; it holds profiles of " + have + hint)));
  }
}

void Database::index_sizes(const std::vector<ProfileFile>& files) {
  std::set<int> mbs_set, tp_set;
  int max_algo = 0;
  for (const auto& f : files) {
    mbs_set.insert(f.mbs);
    tp_set.insert(f.tp);
    max_algo = std::max(max_algo, f.algo);
  }
  mbs_.assign(mbs_set.begin(), mbs_set.end());
  tps_.assign(tp_set.begin(), tp_set.end());
  num_algos_ = max_algo + 1;
  mbs_lookup_.assign(static_cast<std::size_t>(mbs_.back()) + 1, -1);
  for (std::size_t i = 0; i < mbs_.size(); ++i) mbs_lookup_[mbs_[i]] = static_cast<int>(i);
  tp_lookup_.assign(static_cast<std::size_t>(tps_.back()) + 1, -1);
  for (std::size_t i = 0; i < tps_.size(); ++i) tp_lookup_[tps_[i]] = static_cast<int>(i);
  loaded_.assign(mbs_.size() * tps_.size() * static_cast<std::size_t>(num_algos_), 0);
}

namespace {

// The rows of one operator profile file after its checked header.
std::vector<Row> profile_rows(const std::string& file, const std::string& text) {
  std::vector<Row> rows = csv::rows(text);
  if (rows.empty()) throw Error(located(file, 0, "", "empty file (expected a header line)"));
  expect_columns(rows[0], 9, file,
                 "op_name,forward-compute,backward-compute,input_size,output_size,weights,"
                 "activations,fwd_reserved,bwd_reserved");
  if (rows[0].fields[0] != "op_name") {
    throw Error(located(file, rows[0].line, "", "header must start with 'op_name'"));
  }
  rows.erase(rows.begin());
  for (const Row& row : rows) expect_columns(row, 9, file, "one operator per line");
  return rows;
}

}  // namespace

void Database::read_operator_list(const ProfileFile& base) {
  const std::string file = base.path.string();
  const std::string text = read_file(base.path);
  for (const Row& row : profile_rows(file, text)) {
    std::string name(row.fields[0]);
    if (name.empty()) throw Error(located(file, row.line, "op_name", "empty name"));
    if (!op_lookup_.emplace(name, static_cast<int>(op_names_.size())).second) {
      throw Error(located(file, row.line, "op_name", "duplicate operator '" + name + "'"));
    }
    op_names_.push_back(name);
  }
  if (op_names_.empty()) throw Error(located(file, 0, "", "no operators listed"));
  const std::size_t n = op_names_.size() * loaded_.size();
  profiles_.assign(n, OpProfile{});
  present_.assign(n, 0);
}

void Database::read_profiles(const ProfileFile& f, const ProfileFile& base) {
  const std::string file = f.path.string();
  const std::string text = read_file(f.path);
  const int m = mbs_index(f.mbs), t = tp_index(f.tp);
  std::vector<bool> seen(op_names_.size(), false);
  for (const Row& row : profile_rows(file, text)) {
    std::string name(row.fields[0]);
    int op = op_index(name);
    if (op < 0) {
      throw Error(located(
          file, row.line, "op_name",
          "unknown operator '" + name + "' (not in " + base.path.filename().string() + ")"));
    }
    if (seen[static_cast<std::size_t>(op)]) {
      throw Error(located(file, row.line, "op_name", "duplicate operator '" + name + "'"));
    }
    seen[static_cast<std::size_t>(op)] = true;
    const csv::Fields fields(file, row.line);
    double v[8];
    for (int c = 0; c < 8; ++c) v[c] = fields.non_negative(row.fields[c + 1], kOpColumns[c + 1]);
    std::size_t k = slot(op, m, t, f.algo);
    profiles_[k] = OpProfile{v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
    present_[k] = 1;
  }
  loaded_[slot(0, m, t, f.algo)] = 1;
}

void Database::read_collective(const CollectiveFile& f) {
  const std::string file = f.path.string();
  std::string text = read_file(f.path);
  auto rows = csv::rows(text);
  if (rows.empty()) throw Error(located(file, 0, "", "empty file (expected a header line)"));
  expect_columns(rows[0], 2, file, "data_size(MB),time(ms)");
  CollectiveTable table{f.collective, f.num_gpus, {}};
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const Row& row = rows[r];
    expect_columns(row, 2, file, "data_size(MB),time(ms)");
    const csv::Fields fields(file, row.line);
    const int size = fields.non_negative_integer(row.fields[0], "data_size(MB)");
    const double ms = fields.non_negative(row.fields[1], "time(ms)");
    if (!table.ms_by_mb.emplace(size, ms).second) {
      fields.fail("data_size(MB)", "duplicate size " + std::string(row.fields[0]));
    }
  }
  collectives_.push_back(std::move(table));
}

void Database::read_bandwidths() {
  const fs::path intra = dir_ / "p2p_intra_node.csv";
  if (!fs::exists(intra)) {
    throw Error(located(intra.string(), 0, "", "point-to-point bandwidth table not found"));
  }
  intra_gbps_ = read_bandwidth(intra);
  const fs::path inter = dir_ / "p2p_inter_node.csv";
  has_inter_ = fs::exists(inter);
  inter_gbps_ = has_inter_ ? read_bandwidth(inter) : intra_gbps_;
}

bool Database::profiled(int mbs, int tp, int algo) const {
  const int m = mbs_index(mbs), t = tp_index(tp);
  return m >= 0 && t >= 0 && algo >= 0 && algo < num_algos_ && loaded_[slot(0, m, t, algo)] != 0;
}

int Database::op_index(std::string_view name) const {
  auto it = op_lookup_.find(std::string(name));
  return it == op_lookup_.end() ? -1 : it->second;
}

bool Database::has_collective(Collective c, int num_gpus) const {
  for (const auto& t : collectives_) {
    if (t.collective == c && t.num_gpus == num_gpus) return true;
  }
  return false;
}

std::optional<double> Database::collective_ms(Collective c, int num_gpus, double size_mb) const {
  for (const auto& t : collectives_) {
    if (t.collective != c || t.num_gpus != num_gpus) continue;
    // '{:.0f}'.format(size) in the reference: round half to even.
    auto key = static_cast<long long>(std::nearbyint(size_mb));
    if (auto it = t.ms_by_mb.find(key); it != t.ms_by_mb.end()) return it->second;
    key = static_cast<long long>(std::nearbyint(size_mb - 1.0));
    if (auto it = t.ms_by_mb.find(key); it != t.ms_by_mb.end()) return it->second;
    return std::nullopt;
  }
  return std::nullopt;
}

double Database::p2p_us(double size_mb, bool inter_node) const {
  if (!(size_mb > 0.0)) return size_mb;  // the reference divides by a bandwidth of 1
  const std::vector<double>& band = inter_node ? inter_gbps_ : intra_gbps_;
  const int n = static_cast<int>(band.size());
  int index = static_cast<int>(std::log(size_mb) / std::log(2.0));  // int(math.log(size, 2))
  if (index >= 1) index -= 1;
  double gbps;
  if (index >= n) {
    gbps = band.back();
  } else if (index >= 0) {
    gbps = band[static_cast<std::size_t>(index)];
  } else {
    // Python's negative indexing (sizes below 1 MB); the reference fails below -n, we clamp.
    index += n;
    gbps = band[static_cast<std::size_t>(std::max(index, 0))];
  }
  return size_mb / (gbps * 0.001);
}

}  // namespace perseus::search
