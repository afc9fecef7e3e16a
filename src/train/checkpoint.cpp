#include "kiln/train/checkpoint.hpp"

#include "kiln/core/error.hpp"
#include "kiln/store/safetensors.hpp"

// kiln::store's atomic writer and JSON parser, compiled into libkiln_store (whose symbols
// are visible); kiln::train links it and reuses them rather than keeping copies.
#include "store/atomic_file.hpp"
#include "store/json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
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

constexpr std::string_view kFormat = "kiln.train.learner/1";

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
  std::uint64_t unsigned_integer(const json::Value& v, std::string_view key) const {
    const auto n = v.as_uint64();
    if (!n) fail(key, "is not a non-negative integer");
    return *n;
  }
  std::int64_t integer(const json::Value& v, std::string_view key) const {
    const std::uint64_t n = unsigned_integer(v, key);
    if (n > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) fail(key, "is too large");
    return static_cast<std::int64_t>(n);
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
  out += fmt::format("  \"format\": {},\n", json::quote(kFormat));
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
  out += "}\n}\n";
  return out;
}

LearnerState learner_state_from_json(std::string_view text, std::string_view context) {
  const json::Value doc = json::parse(text, context);
  const Reader r{context};
  const json::Value& format = r.member(doc, "format");
  if (format.kind != json::Value::Kind::string || format.text != kFormat)
    r.fail("format", fmt::format("is not \"{}\"", kFormat));
  LearnerState s;
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
  return s;
}

// ---- checkpoint files

namespace {

// A checkpoint directory's place in a run: (epoch, steps), a finished epoch last.
std::optional<std::pair<std::int64_t, std::int64_t>> checkpoint_order(const std::string& name) {
  static const std::regex pattern(R"(epoch-(\d+)(-step-(\d+))?)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  const std::int64_t epoch = std::stoll(m[1].str());
  const std::int64_t step = m[3].matched ? std::stoll(m[3].str()) : std::numeric_limits<std::int64_t>::max();
  return std::pair{epoch, step};
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), "kiln::train: cannot read {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Removes all but the `keep` newest checkpoints that come before `current` in the run
// (`current` counts as one of them); later ones, left by an earlier run, are not touched.
void prune(const fs::path& root, const std::string& current, std::int64_t keep) {
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
  for (std::size_t i = static_cast<std::size_t>(keep - 1); i < older.size(); ++i) fs::remove_all(older[i].second, error);
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

fs::path write_checkpoint(const fs::path& output_dir, const store::NamedTensors& model,
                          const store::NamedTensors& optimizer, const LearnerState& state, std::int64_t keep) {
  const fs::path root = output_dir / "checkpoints";
  const std::string name = checkpoint_name(state);
  const fs::path dir = root / name;
  std::error_code error;
  fs::create_directories(dir, error);
  KILN_CHECK(!error, "kiln::train: cannot create the checkpoint directory {}: {}", dir.string(), error.message());
  store::save_safetensors(dir / "model.safetensors", model);
  store::save_safetensors(dir / "optimizer.safetensors", optimizer);
  write_file_atomically(dir / "learner.json", learner_state_to_json(state));
  // Last: until here, `latest` still names the previous complete checkpoint.
  write_file_atomically(root / "latest", name + "\n");
  prune(root, name, keep);
  return dir;
}

std::optional<Checkpoint> read_latest_checkpoint(const fs::path& output_dir) {
  const fs::path root = output_dir / "checkpoints";
  const fs::path latest = root / "latest";
  if (!fs::exists(latest)) return std::nullopt;
  std::string name = read_text(latest);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  KILN_CHECK(checkpoint_order(name).has_value(), "kiln::train: {} names '{}', which is not a checkpoint name",
             latest.string(), name);
  Checkpoint checkpoint;
  checkpoint.dir = root / name;
  KILN_CHECK(fs::is_directory(checkpoint.dir), "kiln::train: {} names {}, which does not exist", latest.string(),
             checkpoint.dir.string());
  checkpoint.model = store::load_safetensors(checkpoint.dir / "model.safetensors");
  checkpoint.optimizer = store::load_safetensors(checkpoint.dir / "optimizer.safetensors");
  const fs::path state = checkpoint.dir / "learner.json";
  checkpoint.state = learner_state_from_json(read_text(state), state.string());
  return checkpoint;
}

}  // namespace kiln::train
