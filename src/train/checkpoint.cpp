#include "kiln/train/checkpoint.hpp"

#include "kiln/core/error.hpp"
#include "kiln/store/safetensors.hpp"

// kiln::store's atomic writer and JSON parser, compiled into libkiln_store (whose symbols
// are visible); kiln::train links it and reuses them rather than keeping copies.
#include "store/atomic_file.hpp"
#include "store/json.hpp"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>
#include <system_error>

namespace kiln::train {
namespace fs = std::filesystem;
namespace json = store::detail::json;

// ---- the loss curve

void LossCurve::add(double x, double loss) {
  State& s = state_;
  s.x_sum += x;
  s.y_sum += loss;
  if (++s.in_bucket < s.bucket) return;
  const double n = static_cast<double>(s.in_bucket);
  s.points.emplace_back(s.x_sum / n, s.y_sum / n);
  s.x_sum = s.y_sum = 0;
  s.in_bucket = 0;
  if (s.points.size() < capacity_) return;
  // Full: neighbours merge, and each point from now on stands for twice as many steps.
  std::vector<std::pair<double, double>> merged;
  for (std::size_t i = 0; i + 1 < s.points.size(); i += 2)
    merged.emplace_back((s.points[i].first + s.points[i + 1].first) / 2, (s.points[i].second + s.points[i + 1].second) / 2);
  if (s.points.size() % 2 == 1) merged.push_back(s.points.back());
  s.points = std::move(merged);
  s.bucket *= 2;
}

std::vector<std::pair<double, double>> LossCurve::points() const {
  std::vector<std::pair<double, double>> out = state_.points;
  if (state_.in_bucket > 0) {
    const double n = static_cast<double>(state_.in_bucket);
    out.emplace_back(state_.x_sum / n, state_.y_sum / n);
  }
  return out;
}

// ---- learner.json

namespace {

// 2: the run id.
constexpr std::string_view kFormat = "kiln.train.learner/2";

// Text from a file as an error message quotes it: a name or a number of 50,000 characters
// shows its start and its length.
std::string shown(std::string_view text, std::size_t length) {
  constexpr std::size_t kShown = 48;
  if (length <= kShown && text.size() == length) return std::string(text);
  return fmt::format("{}... ({} characters)", text.substr(0, kShown), length);
}
std::string shown(std::string_view text) { return shown(text, text.size()); }
std::string shown(const json::Value& v) {
  switch (v.kind) {
    case json::Value::Kind::null: return "null";
    case json::Value::Kind::boolean: return v.boolean ? "true" : "false";
    case json::Value::Kind::number: return shown(v.text);
    case json::Value::Kind::string: return json::quote(shown(v.text));
    case json::Value::Kind::array: return "an array";
    case json::Value::Kind::object: return "an object";
  }
  return "?";
}

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Doubles in their shortest exact form; the non-finite ones as strings JSON can hold.
std::string number(double v) {
  if (std::isnan(v)) return "\"nan\"";
  if (std::isinf(v)) return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{}", v);
}
std::string optional_number(const std::optional<double>& v) { return v ? number(*v) : "null"; }

std::string metric_values(const MetricValues& values) {
  std::string out = "{";
  for (const auto& [name, value] : values.entries())
    out += fmt::format("{}{}: {}", out.size() > 1 ? ", " : "", json::quote(name), number(value));
  return out + "}";
}

std::string stream(const RandomStream& r) { return fmt::format("{{\"seed\": {}, \"offset\": {}}}", r.seed, r.offset); }

// Reading: each accessor names the key and the file when the document is not what it wrote.
struct Reader {
  std::string_view context;

  [[noreturn]] void fail(std::string_view key, std::string_view what) const {
    KILN_FAIL("{}: {} {}; the checkpoint is damaged or was not written by kiln::train", context, key, what);
  }
  const json::Value& member(const json::Value& object, std::string_view key) const {
    if (object.kind != json::Value::Kind::object) fail(key, "belongs to a value that is not an object");
    for (const json::Member& m : object.object)
      if (m.key == key) return m.value;
    fail(key, "is missing");
  }
  double real(const json::Value& v, std::string_view key) const {
    if (v.kind == json::Value::Kind::number || v.kind == json::Value::Kind::string) {
      char* end = nullptr;
      const double d = std::strtod(v.text.c_str(), &end);
      if (end != v.text.c_str() && *end == '\0') return d;
    }
    fail(key, "is not a number");
  }
  std::optional<double> optional_real(const json::Value& v, std::string_view key) const {
    if (v.kind == json::Value::Kind::null) return std::nullopt;
    return real(v, key);
  }
  // Any 64-bit value (a random stream's seed, a file size).
  std::uint64_t unsigned_integer(const json::Value& v, std::string_view key) const {
    const auto n = v.as_uint64();
    if (n) return *n;
    if (v.kind == json::Value::Kind::number && all_digits(v.text))
      fail(key, fmt::format("is {}, more than 64 bits hold", shown(v.text)));
    fail(key, fmt::format("is not a non-negative integer (it is {})", shown(v)));
  }
  // A count of epochs, steps, ...: at most kMaxCheckpointCount, so that the loop's
  // arithmetic on it cannot overflow.
  std::int64_t integer(const json::Value& v, std::string_view key) const {
    const auto n = v.as_uint64();
    if (!n && !(v.kind == json::Value::Kind::number && all_digits(v.text)))
      fail(key, fmt::format("is not a non-negative integer (it is {})", shown(v)));
    if (!n || *n > static_cast<std::uint64_t>(kMaxCheckpointCount))
      fail(key, fmt::format("is {}, more than the largest count a checkpoint may hold ({}, 2^53)", shown(v.text),
                            kMaxCheckpointCount));
    return static_cast<std::int64_t>(*n);
  }
  const std::string& text(const json::Value& v, std::string_view key) const {
    if (v.kind != json::Value::Kind::string) fail(key, fmt::format("is not a string (it is {})", shown(v)));
    return v.text;
  }
  bool boolean(const json::Value& v, std::string_view key) const {
    if (v.kind != json::Value::Kind::boolean) fail(key, "is not true or false");
    return v.boolean;
  }
  const std::vector<json::Value>& array(const json::Value& v, std::string_view key) const {
    if (v.kind != json::Value::Kind::array) fail(key, "is not an array");
    return v.array;
  }
  const std::vector<json::Member>& object(const json::Value& v, std::string_view key) const {
    if (v.kind != json::Value::Kind::object) fail(key, "is not an object");
    return v.object;
  }
  RandomStream stream(const json::Value& v, std::string_view key) const {
    return {unsigned_integer(member(v, "seed"), key), unsigned_integer(member(v, "offset"), key)};
  }
  MetricValues values(const json::Value& v, std::string_view key) const {
    MetricValues out;
    for (const json::Member& m : object(v, key)) out.set(m.key, real(m.value, key));
    return out;
  }
};

}  // namespace

std::string learner_state_to_json(const LearnerState& s) {
  std::string out = "{\n";
  out += fmt::format("  \"format\": {},\n  \"run_id\": {},\n", json::quote(kFormat), json::quote(s.run_id));
  out += fmt::format("  \"epoch\": {},\n  \"train_steps\": {},\n  \"train_done\": {},\n  \"epoch_done\": {},\n",
                     s.epoch, s.train_steps, s.train_done, s.epoch_done);
  out += fmt::format("  \"global_step\": {},\n  \"rng\": {},\n  \"epoch_rng\": {},\n", s.global_step, stream(s.rng),
                     stream(s.epoch_rng));
  out += "  \"history\": [";
  for (std::size_t i = 0; i < s.history.size(); ++i)
    out += fmt::format("{}\n    {{\"epoch\": {}, \"global_step\": {}, \"train\": {}, \"valid\": {}}}", i ? "," : "",
                       s.history[i].epoch, s.history[i].global_step, metric_values(s.history[i].train),
                       metric_values(s.history[i].valid));
  out += s.history.empty() ? "],\n" : "\n  ],\n";
  out += "  \"train_partial\": [";
  for (std::size_t i = 0; i < s.train_partial.size(); ++i) {
    const auto& [name, a] = s.train_partial[i];
    out += fmt::format(
        "{}\n    {{\"metric\": {}, \"weighted_sum\": {}, \"weight\": {}, \"last\": {}, \"max\": {}, \"count\": {}}}",
        i ? "," : "", json::quote(name), number(a.weighted_sum), number(a.weight), number(a.last), number(a.max),
        a.count);
  }
  out += s.train_partial.empty() ? "],\n" : "\n  ],\n";
  out += fmt::format("  \"early_stopping\": {{\"best\": {}, \"bad_epochs\": {}}},\n",
                     optional_number(s.early_stopping_best), s.early_stopping_bad_epochs);
  out += fmt::format("  \"best_model\": {{\"value\": {}, \"epoch\": {}}},\n", optional_number(s.best_value), s.best_epoch);
  const LossCurve::State& c = s.loss_curve;
  out += fmt::format("  \"loss_curve\": {{\"bucket\": {}, \"x_sum\": {}, \"y_sum\": {}, \"in_bucket\": {}, \"points\": [",
                     c.bucket, number(c.x_sum), number(c.y_sum), c.in_bucket);
  for (std::size_t i = 0; i < c.points.size(); ++i)
    out += fmt::format("{}[{}, {}]", i ? ", " : "", number(c.points[i].first), number(c.points[i].second));
  out += "]},\n  \"log_sizes\": {";
  for (std::size_t i = 0; i < s.log_sizes.size(); ++i)
    out += fmt::format("{}{}: {}", i ? ", " : "", json::quote(s.log_sizes[i].first), s.log_sizes[i].second);
  out += "}";
  if (s.plateau)
    out += fmt::format(",\n  \"plateau\": {{\"lr\": {}, \"best\": {}, \"bad_steps\": {}, \"cooldown_left\": {}, "
                       "\"steps\": {}}}",
                       number(s.plateau->lr), number(s.plateau->best), s.plateau->bad_steps, s.plateau->cooldown_left,
                       s.plateau->steps);
  out += "\n}\n";
  return out;
}

LearnerState learner_state_from_json(std::string_view text, std::string_view context) {
  const json::Value doc = json::parse(text, context);
  const Reader r{context};
  const json::Value& format = r.member(doc, "format");
  if (format.kind != json::Value::Kind::string || format.text != kFormat)
    r.fail("format", fmt::format("is not \"{}\"", kFormat));
  LearnerState s;
  s.run_id = r.text(r.member(doc, "run_id"), "run_id");
  s.epoch = r.integer(r.member(doc, "epoch"), "epoch");
  s.train_steps = r.integer(r.member(doc, "train_steps"), "train_steps");
  s.train_done = r.boolean(r.member(doc, "train_done"), "train_done");
  s.epoch_done = r.boolean(r.member(doc, "epoch_done"), "epoch_done");
  s.global_step = r.integer(r.member(doc, "global_step"), "global_step");
  s.rng = r.stream(r.member(doc, "rng"), "rng");
  s.epoch_rng = r.stream(r.member(doc, "epoch_rng"), "epoch_rng");
  for (const json::Value& e : r.array(r.member(doc, "history"), "history")) {
    EpochRecord record;
    record.epoch = r.integer(r.member(e, "epoch"), "history.epoch");
    record.global_step = r.integer(r.member(e, "global_step"), "history.global_step");
    record.train = r.values(r.member(e, "train"), "history.train");
    record.valid = r.values(r.member(e, "valid"), "history.valid");
    s.history.push_back(std::move(record));
  }
  for (const json::Value& p : r.array(r.member(doc, "train_partial"), "train_partial")) {
    const json::Value& name = r.member(p, "metric");
    if (name.kind != json::Value::Kind::string) r.fail("train_partial.metric", "is not a string");
    Aggregator a;
    a.weighted_sum = r.real(r.member(p, "weighted_sum"), "train_partial.weighted_sum");
    a.weight = r.real(r.member(p, "weight"), "train_partial.weight");
    a.last = r.real(r.member(p, "last"), "train_partial.last");
    a.max = r.real(r.member(p, "max"), "train_partial.max");
    a.count = r.integer(r.member(p, "count"), "train_partial.count");
    s.train_partial.emplace_back(name.text, a);
  }
  const json::Value& early = r.member(doc, "early_stopping");
  s.early_stopping_best = r.optional_real(r.member(early, "best"), "early_stopping.best");
  s.early_stopping_bad_epochs = r.integer(r.member(early, "bad_epochs"), "early_stopping.bad_epochs");
  const json::Value& best = r.member(doc, "best_model");
  s.best_value = r.optional_real(r.member(best, "value"), "best_model.value");
  s.best_epoch = r.integer(r.member(best, "epoch"), "best_model.epoch");
  const json::Value& curve = r.member(doc, "loss_curve");
  s.loss_curve.bucket = r.integer(r.member(curve, "bucket"), "loss_curve.bucket");
  if (s.loss_curve.bucket < 1) r.fail("loss_curve.bucket", "is 0; a point stands for at least one step");
  s.loss_curve.x_sum = r.real(r.member(curve, "x_sum"), "loss_curve.x_sum");
  s.loss_curve.y_sum = r.real(r.member(curve, "y_sum"), "loss_curve.y_sum");
  s.loss_curve.in_bucket = r.integer(r.member(curve, "in_bucket"), "loss_curve.in_bucket");
  for (const json::Value& p : r.array(r.member(curve, "points"), "loss_curve.points")) {
    const auto& xy = r.array(p, "loss_curve.points");
    if (xy.size() != 2) r.fail("loss_curve.points", "has a point that is not [x, y]");
    s.loss_curve.points.emplace_back(r.real(xy[0], "loss_curve.points"), r.real(xy[1], "loss_curve.points"));
  }
  for (const json::Member& m : r.object(r.member(doc, "log_sizes"), "log_sizes"))
    s.log_sizes.emplace_back(m.key, r.unsigned_integer(m.value, "log_sizes"));
  // Only in the checkpoints of runs with LearnerOptions::plateau.
  for (const json::Member& m : r.object(doc, "the document"))
    if (m.key == "plateau") {
      optim::ReduceLROnPlateau::State p;
      p.lr = r.real(r.member(m.value, "lr"), "plateau.lr");
      p.best = r.real(r.member(m.value, "best"), "plateau.best");
      p.bad_steps = r.integer(r.member(m.value, "bad_steps"), "plateau.bad_steps");
      p.cooldown_left = r.integer(r.member(m.value, "cooldown_left"), "plateau.cooldown_left");
      p.steps = r.integer(r.member(m.value, "steps"), "plateau.steps");
      s.plateau = p;
    }
  return s;
}

// ---- checkpoint files

namespace {

// `latest` holds one name; a longer file is damaged (and is not read whole).
constexpr std::size_t kMaxLatestBytes = 4096;

// The number at the start of `rest` (digits only), taken off it; nullopt when there is none
// or it is beyond kMaxCheckpointCount.
std::optional<std::int64_t> take_count(std::string_view& rest) {
  std::size_t digits = 0;
  while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') ++digits;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + digits, value);
  if (digits == 0 || error != std::errc{} || value > kMaxCheckpointCount) return std::nullopt;
  rest.remove_prefix(digits);
  return value;
}

// A checkpoint directory's place in a run: (epoch, steps), a finished epoch last. Names are
// "epoch-<N>" and "epoch-<N>-step-<M>"; they come from the file system and from `latest`,
// so they are parsed by hand, with a length limit (a regex recursed per character, and
// stoll threw on 30 digits).
std::optional<std::pair<std::int64_t, std::int64_t>> checkpoint_order(std::string_view name) {
  constexpr std::size_t kMaxName = 64;
  constexpr std::string_view epoch = "epoch-", step = "-step-";
  if (name.size() > kMaxName || !name.starts_with(epoch)) return std::nullopt;
  name.remove_prefix(epoch.size());
  const auto e = take_count(name);
  if (!e) return std::nullopt;
  if (name.empty()) return std::pair{*e, std::numeric_limits<std::int64_t>::max()};
  if (!name.starts_with(step)) return std::nullopt;
  name.remove_prefix(step.size());
  const auto s = take_count(name);
  if (!s || !name.empty()) return std::nullopt;
  return std::pair{*e, *s};
}

// The file's bytes; a FIFO or a device would block or never end, so only a regular file.
std::string read_text(const fs::path& path) {
  std::error_code error;
  KILN_CHECK(fs::is_regular_file(path, error), "kiln::train: {} is not a regular file; a checkpoint holds files",
             path.string());
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "kiln::train: cannot read {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The atomic writer's temporary files are ".<name>.tmp-<pid>-<n>-<ticks>"; unfinished
// checkpoint directories are named alike.
bool is_temporary(std::string_view name) {
  return name.size() > 1 && name[0] == '.' && name.find(".tmp-", 1) != std::string_view::npos;
}

// Removes the temporary files (and directories) in `dir`; with `prefixes`, only those of
// these files.
void remove_temporaries(const fs::path& dir, std::initializer_list<std::string_view> prefixes = {}) {
  std::error_code error;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (!is_temporary(name)) continue;
    if (prefixes.size() == 0 ||
        std::any_of(prefixes.begin(), prefixes.end(), [&](std::string_view p) { return name.starts_with(p); }))
      stale.push_back(entry.path());
  }
  for (const fs::path& path : stale) fs::remove_all(path, error);
}

// A fresh name beside `target` in the atomic writer's pattern.
fs::path temporary_path(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return target.parent_path() / fmt::format(".{}.tmp-{}-{}-{:x}", target.filename().string(), ::getpid(),
                                            counter.fetch_add(1), static_cast<unsigned long long>(ticks));
}

// Flushes a directory's entries (renames in it) to disk.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Puts the complete directory `fresh` in `target`'s place in one step, so that `target` never
// holds files of two writes: a rename, or where `target` is a checkpoint already, an
// exchange of the two (Linux's renameat2 RENAME_EXCHANGE), after which `fresh` holds the old
// one, which is removed. Where the file system cannot exchange, the old one is renamed aside
// first: a crash between the two renames leaves `target` missing (an error on resume, never a
// mix).
void install(const fs::path& fresh, const fs::path& target) {
  auto failed = [&](const char* step, int error) {
    std::error_code ignored;
    fs::remove_all(fresh, ignored);
    KILN_FAIL("kiln::train: cannot write the checkpoint {}: {} failed: {}", target.string(), step,
              std::strerror(error));
  };
  if (::rename(fresh.c_str(), target.c_str()) == 0) return sync_directory(target.parent_path());
  if (errno != ENOTEMPTY && errno != EEXIST) failed("renaming the new checkpoint into place", errno);
  std::error_code error;
#ifdef RENAME_EXCHANGE
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    sync_directory(target.parent_path());
    fs::remove_all(fresh, error);
    return;
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP && errno != EOPNOTSUPP)
    failed("exchanging the new checkpoint with the old one", errno);
#endif
  const fs::path aside = temporary_path(target);
  if (::rename(target.c_str(), aside.c_str()) != 0) failed("moving the old checkpoint aside", errno);
  if (::rename(fresh.c_str(), target.c_str()) != 0) {
    const int failure = errno;
    ::rename(aside.c_str(), target.c_str());
    failed("renaming the new checkpoint into place", failure);
  }
  sync_directory(target.parent_path());
  fs::remove_all(aside, error);
}

// Removes all but the `keep` newest checkpoints that come before `current` in the run
// (`current` counts as one of them) and those named in `also_keep`; later ones, left by an
// earlier run, are not touched.
void prune(const fs::path& root, const std::string& current, std::int64_t keep,
           const std::vector<std::string>& also_keep) {
  if (keep <= 0) return;
  const auto current_order = checkpoint_order(current);
  std::vector<std::pair<std::pair<std::int64_t, std::int64_t>, fs::path>> older;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (!entry.is_directory(error)) continue;
    const std::string name = entry.path().filename().string();
    const auto order = checkpoint_order(name);
    if (name == current || !order || !current_order || *order >= *current_order) continue;
    older.emplace_back(*order, entry.path());
  }
  std::sort(older.begin(), older.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = static_cast<std::size_t>(keep - 1); i < older.size(); ++i)
    if (std::find(also_keep.begin(), also_keep.end(), older[i].second.filename().string()) == also_keep.end())
      fs::remove_all(older[i].second, error);
}

constexpr const char* kRunKey = "kiln.train.run_id";
constexpr const char* kNameKey = "kiln.train.checkpoint";

// A metadata value as errors show it.
std::string metadata_value(const std::map<std::string, std::string>& metadata, const char* key) {
  const auto it = metadata.find(key);
  return it == metadata.end() ? "none" : "'" + shown(it->second) + "'";
}

}  // namespace

std::string checkpoint_name(const LearnerState& state) {
  if (state.epoch_done) return fmt::format("epoch-{:04}", state.epoch);
  return fmt::format("epoch-{:04}-step-{:06}", state.epoch, state.train_steps);
}

void write_file_atomically(const fs::path& path, std::string_view text) {
  store::detail::AtomicFile file(path, "kiln::train");
  file.write(std::as_bytes(std::span(text.data(), text.size())));
  file.commit();
}

void remove_temporary_files(const fs::path& output_dir) {
  remove_temporaries(output_dir, {".best.safetensors.tmp-", ".learning_curves.svg.tmp-"});
  const fs::path root = output_dir / "checkpoints";
  remove_temporaries(root);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error))
    if (entry.is_directory(error) && checkpoint_order(entry.path().filename().string()))
      remove_temporaries(entry.path());
}

fs::path write_checkpoint(const fs::path& output_dir, const store::NamedTensors& model,
                          const store::NamedTensors& optimizer, const LearnerState& state, std::int64_t keep,
                          const std::vector<std::string>& also_keep) {
  const fs::path root = output_dir / "checkpoints";
  const std::string name = checkpoint_name(state);
  const fs::path dir = root / name;
  std::error_code error;
  fs::create_directories(root, error);
  KILN_CHECK(!error, "kiln::train: cannot create the checkpoint directory {}: {}", root.string(), error.message());
  remove_temporaries(root);
  // A fresh directory, so that no file of an earlier checkpoint of this name (another run's,
  // or one whose write was killed) is ever beside this one's.
  fs::path fresh;
  for (int attempt = 0; attempt < 100 && fresh.empty(); ++attempt) {
    const fs::path candidate = temporary_path(dir);
    if (fs::create_directory(candidate, error)) fresh = candidate;
    KILN_CHECK(!error, "kiln::train: cannot create the checkpoint directory {}: {}", candidate.string(),
               error.message());
  }
  KILN_CHECK(!fresh.empty(), "kiln::train: cannot create a fresh directory for the checkpoint {}", dir.string());
  try {
    store::SafetensorsWriteOptions stamped;
    stamped.metadata = {{kRunKey, state.run_id}, {kNameKey, name}};
    store::save_safetensors(fresh / "model.safetensors", model, stamped);
    store::save_safetensors(fresh / "optimizer.safetensors", optimizer, stamped);
    write_file_atomically(fresh / "learner.json", learner_state_to_json(state));
  } catch (...) {
    fs::remove_all(fresh, error);
    throw;
  }
  install(fresh, dir);
  // Last: until here, `latest` still names the previous complete checkpoint.
  write_file_atomically(root / "latest", name + "\n");
  prune(root, name, keep, also_keep);
  return dir;
}

std::optional<Checkpoint> read_latest_checkpoint(const fs::path& output_dir) {
  const fs::path root = output_dir / "checkpoints";
  const fs::path latest = root / "latest";
  std::error_code error;
  if (!fs::exists(latest, error)) return std::nullopt;
  KILN_CHECK(fs::is_regular_file(latest, error),
             "kiln::train: {} is not a regular file; it should hold the name of the newest checkpoint",
             latest.string());
  const std::uintmax_t size = fs::file_size(latest, error);
  std::string name;
  {
    std::ifstream in(latest, std::ios::binary);
    KILN_CHECK(in.good(), "kiln::train: cannot read {}", latest.string());
    name.resize(kMaxLatestBytes);
    in.read(name.data(), static_cast<std::streamsize>(name.size()));
    name.resize(static_cast<std::size_t>(in.gcount()));
  }
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  KILN_CHECK(size <= kMaxLatestBytes && checkpoint_order(name).has_value(),
             "kiln::train: {} names '{}', which is not a checkpoint name (epoch-<N> or epoch-<N>-step-<M>, N and M "
             "at most {}); the file is damaged",
             latest.string(), shown(name, size <= kMaxLatestBytes ? name.size() : static_cast<std::size_t>(size)),
             kMaxCheckpointCount);
  Checkpoint checkpoint;
  checkpoint.dir = root / name;
  KILN_CHECK(fs::is_directory(checkpoint.dir, error),
             "kiln::train: {} names {}, which does not exist (removed by hand, or a write was killed on a file "
             "system that cannot exchange directories); resume from another checkpoint by writing its name there",
             latest.string(), checkpoint.dir.string());
  const fs::path state = checkpoint.dir / "learner.json";
  checkpoint.state = learner_state_from_json(read_text(state), state.string());
  KILN_CHECK(checkpoint_name(checkpoint.state) == name,
             "kiln::train: {} holds the position of checkpoint {}, not of {}, the directory it is in; the checkpoint "
             "was assembled by hand or is damaged",
             state.string(), checkpoint_name(checkpoint.state), name);
  // The model's and the optimizer's files must come from the write that wrote learner.json.
  auto load = [&](const char* file) {
    const fs::path path = checkpoint.dir / file;
    KILN_CHECK(fs::is_regular_file(path, error), "kiln::train: {} is missing or not a regular file", path.string());
    const store::SafetensorsFile tensors = store::SafetensorsFile::open(path);
    const auto& metadata = tensors.metadata();
    const auto run = metadata.find(kRunKey), written_as = metadata.find(kNameKey);
    KILN_CHECK(run != metadata.end() && run->second == checkpoint.state.run_id && written_as != metadata.end() &&
                   written_as->second == name,
               "kiln::train: {} was written by run {} as checkpoint {}, but {} by run '{}' as {}: the checkpoint "
               "mixes the files of two writes; resume from another checkpoint (write its name in {}) or start afresh",
               path.string(), metadata_value(metadata, kRunKey), metadata_value(metadata, kNameKey), state.string(),
               shown(checkpoint.state.run_id), name, latest.string());
    return tensors.load_all();
  };
  checkpoint.model = load("model.safetensors");
  checkpoint.optimizer = load("optimizer.safetensors");
  return checkpoint;
}

}  // namespace kiln::train
