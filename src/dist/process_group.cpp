// The process group over MPI. Every collective begins with a nonblocking barrier polled
// against the deadline of KILN_DIST_TIMEOUT, so that a rank that hangs, or died without the
// launcher ending the job, makes the others throw instead of waiting forever; the data then
// moves in MPI's blocking collective (arrive_then).
#include "kiln/dist/process_group.hpp"

#include "rendezvous.hpp"

#include <mpi.h>

#include <algorithm>
#include <utility>
#include <mutex>
#include <exception>
#include <deque>
#include <condition_variable>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace kiln::dist {

namespace {

struct State {
  bool initialized = false;
  bool owns_mpi = false;  // init() started MPI, so finalize() ends it
  bool broken = false;    // a collective timed out: the group cannot be used again
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int local_rank = 0, local_size = 1;  // among the ranks on this host
  bool serialized = false;             // MPI lets a second thread call it (one at a time)
  std::optional<detail::Rendezvous> rendezvous;  // started without a launcher (rendezvous.hpp)
  double timeout = 300.0;
  std::int64_t collectives = 0;  // entered so far: where this rank is, for a rank that timed out
};

State& state() {
  static State s;
  return s;
}

void check_mpi(int code, std::string_view op) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  KILN_FAIL("{}: MPI failed: {}", op, std::string_view(text, static_cast<std::size_t>(length)));
}

// The state, once init() ran: what rank() and world_size() read, even after a timeout.
State& joined(std::string_view op) {
  State& s = state();
  KILN_CHECK(s.initialized, "{}: the process group is not initialized; call kiln::dist::init() first", op);
  return s;
}

// The state, for a collective: init() ran and no collective timed out.
State& ready(std::string_view op) {
  State& s = joined(op);
  KILN_CHECK(!s.broken,
             "{}: an earlier collective timed out on rank {}; the process group cannot be used again (end the job)",
             op, s.rank);
  return s;
}

double read_timeout() {
  const char* text = std::getenv("KILN_DIST_TIMEOUT");
  if (!text || !*text) return 300.0;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  KILN_CHECK(end && *end == '\0' && seconds > 0, "dist::init: KILN_DIST_TIMEOUT must be a positive number of seconds, got '{}'",
             std::string_view(text));
  return seconds;
}

// ---- who is missing, when a collective times out. Each rank counts the collectives it
// has entered. A rank that waits in a collective answers the others' "where are you"
// messages with its count (point-to-point, on Kiln's communicator, apart from the
// collectives' traffic); a rank that timed out asks every other rank, and those that do not
// answer within a grace period are the ones that died or hang.
constexpr int kAskTag = 0x4b31;
constexpr int kAnswerTag = 0x4b32;

// Answers every question that has arrived with this rank's count.
void answer_questions(State& s, std::int64_t count) {
  static std::vector<std::int64_t> answers;  // kept alive until the job ends: the sends are not waited on
  answers.reserve(1024);
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kAskTag, s.comm, &arrived, &status) != MPI_SUCCESS || !arrived) return;
    std::int64_t question = 0;
    MPI_Recv(&question, 1, MPI_INT64_T, status.MPI_SOURCE, kAskTag, s.comm, MPI_STATUS_IGNORE);
    if (answers.size() == answers.capacity()) return;  // a thousand questions: nobody is listening any more
    answers.push_back(count);
    MPI_Request request;
    if (MPI_Isend(&answers.back(), 1, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, s.comm, &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

// Asks every other rank where it is and waits up to `grace` seconds for the answers; the
// message says which ranks did not answer, and which are at another collective.
std::string find_missing(State& s, std::int64_t count, double grace) {
  std::vector<std::int64_t> answers(static_cast<std::size_t>(s.size), -1);
  std::vector<MPI_Request> receives, sends;
  static std::int64_t asked;  // the sends are not waited on: their buffer outlives them
  asked = count;
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    MPI_Request request;
    MPI_Irecv(&answers[static_cast<std::size_t>(r)], 1, MPI_INT64_T, r, kAnswerTag, s.comm, &request);
    receives.push_back(request);
    MPI_Isend(&asked, 1, MPI_INT64_T, r, kAskTag, s.comm, &request);
    sends.push_back(request);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace);
  for (;;) {
    answer_questions(s, count);
    int all = 0;
    MPI_Testall(static_cast<int>(receives.size()), receives.data(), &all, MPI_STATUSES_IGNORE);
    if (all || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (MPI_Request& request : receives)
    if (request != MPI_REQUEST_NULL) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  for (MPI_Request& request : sends)
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  std::vector<int> silent, elsewhere;
  for (int r = 0; r < s.size; ++r) {
    if (r == s.rank) continue;
    const std::int64_t answer = answers[static_cast<std::size_t>(r)];
    if (answer < 0) silent.push_back(r);
    else if (answer != count) elsewhere.push_back(r);
  }
  // "rank 2" or "ranks 1, 3"
  const auto ranks = [](const std::vector<int>& list) {
    std::string out = list.size() == 1 ? "rank " : "ranks ";
    for (std::size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + std::to_string(list[i]);
    return out;
  };
  std::string text;
  if (!silent.empty())
    text += kiln::detail::join_message("; {} did not answer within {} s: died or hangs", {ranks(silent), grace});
  if (!elsewhere.empty())
    text += kiln::detail::join_message("; {} waits at another collective (the ranks called different collectives, or in "
                                 "another order)",
                                 {ranks(elsewhere)});
  if (text.empty()) text = "; every rank answered, at this collective";
  return text;
}

// Polls `request` until it completes; past the deadline, marks the group broken and throws,
// naming the ranks that are missing.
void wait(MPI_Request& request, std::string_view op, std::int64_t count, bool spin = true) {
  State& s = state();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(s.timeout);
  for (long polls = 0;; ++polls) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), op);
    if (done) return;
    // MPI moves a nonblocking collective on only inside MPI_Test: poll without sleeping
    // for the first second (a bucket of gradients takes milliseconds, and the other ranks
    // may still be in their backward), then sleep a little between polls.
    const auto waited = std::chrono::steady_clock::now() - start;
    if (spin && waited < std::chrono::seconds(1)) {
      if (polls % 1024 == 1023) answer_questions(s, count);
      std::this_thread::yield();
      continue;
    }
    answer_questions(s, count);
    if (std::chrono::steady_clock::now() > deadline) {
      s.broken = true;
      const std::string missing = find_missing(s, count, std::min(s.timeout, 10.0));
      KILN_FAIL("{}: rank {} waited {} s (KILN_DIST_TIMEOUT) for the other ranks of {}{}", op, s.rank, s.timeout, s.size,
                missing);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(waited < std::chrono::seconds(10) ? 50 : 500));
  }
}

// A collective's place in this rank's sequence, counted when it starts.
void wait(MPI_Request& request, std::string_view op) { wait(request, op, ++state().collectives); }

// Runs a collective that moves data: first a small nonblocking all-reduce polled against
// the timeout (so that a rank that died or hangs is found and named) in which the ranks
// also compare the collective they called and its byte count, then `call`, MPI's blocking
// collective, once every rank is there with the same one. MPI's blocking collectives run
// several times faster than its nonblocking ones here (shared memory: 2.8 against 7-16 ms
// for 11.6 MB on two ranks), and cannot wait forever once every rank has arrived. `spin`:
// poll without sleeping at first (the calling thread has nothing else to do).
void arrive(State& s, std::string_view op, std::size_t bytes, bool spin) {
  std::uint64_t code = 1469598103934665603ull;
  for (const char c : op) code = (code ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  const std::int64_t mine[] = {static_cast<std::int64_t>(code >> 1), static_cast<std::int64_t>(bytes)};
  std::int64_t both[] = {mine[0], mine[1], -mine[0], -mine[1]};  // max(v) == -max(-v): the same everywhere
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, both, 4, MPI_INT64_T, MPI_MAX, s.comm, &request), op);
  wait(request, op, ++s.collectives, spin);
  KILN_CHECK(both[0] == -both[2] && both[1] == -both[3],
             "{}: the ranks called different collectives, or the same one on different sizes, at collective {} (rank {} "
             "called {} on {} bytes); every rank must call the same collectives in the same order",
             op, s.collectives, s.rank, op, bytes);
}

template <class Call> void arrive_then(State& s, std::string_view op, std::size_t bytes, bool spin, Call&& call) {
  arrive(s, op, bytes, spin);
  check_mpi(call(), op);
}

struct TypeOf {
  MPI_Datatype type;
  bool via_f32;  // f16 / bf16: reduced as f32
};

TypeOf mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return {MPI_FLOAT, false};
    case DType::f64: return {MPI_DOUBLE, false};
    case DType::f16:
    case DType::bf16: return {MPI_FLOAT, true};
    case DType::i32: return {MPI_INT32_T, false};
    case DType::i64: return {MPI_INT64_T, false};
    case DType::u8: return {MPI_UINT8_T, false};
    case DType::boolean: return {MPI_UINT8_T, false};
  }
  return {MPI_BYTE, false};
}

// The MPI operation of `op` on `dtype`, after the checks that name what is not supported.
MPI_Op mpi_op(std::string_view name, ReduceOp op, DType dtype) {
  KILN_CHECK(op != ReduceOp::mean || is_float(dtype),
             "{}: mean needs a float tensor, got {} (use sum and divide where integer division is meant)", name, dtype);
  if (dtype == DType::boolean) return MPI_MAX;  // sum and max of bools: any
  return op == ReduceOp::max ? MPI_MAX : MPI_SUM;
}

void check_count(std::string_view op, std::int64_t count) {
  KILN_CHECK(count <= INT_MAX, "{}: {} elements are more than one MPI call takes ({}); split the tensor", op, count,
             INT_MAX);
}

// The elements of `data` as the MPI buffer to reduce: the bytes themselves, or for f16 and
// bf16 a copy as f32.
struct ReduceBuffer {
  std::vector<float> widened;
  void* pointer = nullptr;

  explicit ReduceBuffer(TensorData& data) {
    if (mpi_type(data.dtype()).via_f32) {
      widened = data.to_vec<float>();
      pointer = widened.data();
    } else {
      pointer = data.bytes().data();
    }
  }
  // Writes the reduced values back into `data`, divided by `divisor` (the world size, for mean).
  void finish(TensorData& data, int divisor) {
    if (data.dtype() == DType::f16 || data.dtype() == DType::bf16) {
      visit_dtype(data.dtype(), [&]<class T>() {
        T* out = reinterpret_cast<T*>(data.bytes().data());
        const std::size_t count = widened.size();
        const float by = static_cast<float>(divisor);
        for (std::size_t i = 0; i < count; ++i) out[i] = T(widened[i] / by);
      });
    } else if (divisor != 1) {
      visit_dtype(data.dtype(), [&]<class T>() {
        if constexpr (std::is_floating_point_v<T>) {
          T* out = reinterpret_cast<T*>(data.bytes().data());
          const std::int64_t count = data.numel();
          const T by = static_cast<T>(divisor);
          for (std::int64_t i = 0; i < count; ++i) out[i] /= by;
        }
      });
    }
  }
};

// {dtype, rank, dims...}: what every rank's tensor must agree on.
std::vector<std::int64_t> signature(const TensorData& data) {
  std::vector<std::int64_t> values{static_cast<std::int64_t>(data.dtype()), static_cast<std::int64_t>(data.shape().rank())};
  for (std::size_t d = 0; d < data.shape().rank(); ++d) values.push_back(data.shape()[d]);
  return values;
}

// Throws on every rank when the ranks' tensors differ in dtype or shape.
void check_same_tensor(std::string_view op, const TensorData& data, std::int64_t extra = 0) {
  // Ranks may differ in rank (the number of dims), so the dims are folded into a fixed
  // number of values: the dtype, the rank, the element count, a hash of the dims, `extra`.
  std::uint64_t hash = 1469598103934665603ull;
  for (const std::int64_t v : signature(data)) hash = (hash ^ static_cast<std::uint64_t>(v)) * 1099511628211ull;
  const std::int64_t values[] = {static_cast<std::int64_t>(data.dtype()), static_cast<std::int64_t>(data.shape().rank()),
                                 data.numel(), static_cast<std::int64_t>(hash >> 1), extra};
  const std::int64_t at = detail::first_disagreement(values);
  if (at < 0) return;
  if (at == 4)
    KILN_FAIL("{}: the ranks passed different roots (rank {} passed {}); every rank must name the same root", op,
              state().rank, extra);
  KILN_FAIL("{}: the ranks passed tensors of different shapes or dtypes (rank {} has {} {}); every rank must pass the "
            "same shape and dtype",
            op, state().rank, data.dtype(), data.shape());
}

void leave_at_exit() { finalize(); }

// KILN_RANK / KILN_WORLD_SIZE, where set, must be what the launcher made of this process.
void check_environment_numbering(const State& s) {
  const auto world = detail::whole_number_env("KILN_WORLD_SIZE"), rank = detail::whole_number_env("KILN_RANK");
  KILN_CHECK(!world || *world == s.size,
             "dist::init: KILN_WORLD_SIZE is {} but the launcher started {} process{}{}", *world, s.size,
             s.size == 1 ? "" : "es",
             s.size == 1 ? " (this one alone: start the job with an MPI launcher, e.g. mpirun -np N or srun, or set "
                           "KILN_DIST_RENDEZVOUS)"
                         : "");
  KILN_CHECK(!rank || *rank == s.rank, "dist::init: KILN_RANK is {} but the launcher made this process rank {} of {}",
             *rank, s.rank, s.size);
}

}  // namespace

void init() {
  State& s = state();
  if (s.initialized) return;
  KILN_CHECK(!s.broken, "dist::init: the process group timed out earlier and cannot be joined again");
  s.timeout = read_timeout();
  int mpi_started = 0, mpi_ended = 0;
  MPI_Initialized(&mpi_started);
  MPI_Finalized(&mpi_ended);
  KILN_CHECK(!mpi_ended, "dist::init: MPI was already finalized in this process; it cannot be started again");
  if (!mpi_started) {
    s.rendezvous = detail::launcher_free();
    if (s.rendezvous) detail::prepare(*s.rendezvous, s.timeout);
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "dist::init");
    s.owns_mpi = true;
    static const bool registered = (std::atexit(leave_at_exit), true);
    (void)registered;
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  s.serialized = level >= MPI_THREAD_SERIALIZED;
  // A communicator of Kiln's own: a program's own MPI calls on MPI_COMM_WORLD never match
  // Kiln's collectives; errors come back as codes (check_mpi) instead of aborting.
  if (s.rendezvous) {
    s.comm = detail::join(*s.rendezvous, s.timeout);  // already Kiln's own
  } else {
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &s.comm), "dist::init");
  }
  MPI_Comm_set_errhandler(s.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  MPI_Comm host = MPI_COMM_NULL;
  if (MPI_Comm_split_type(s.comm, MPI_COMM_TYPE_SHARED, s.rank, MPI_INFO_NULL, &host) == MPI_SUCCESS &&
      host != MPI_COMM_NULL) {
    MPI_Comm_rank(host, &s.local_rank);
    MPI_Comm_size(host, &s.local_size);
    MPI_Comm_free(&host);
  }
  s.initialized = true;
  check_environment_numbering(s);
}

bool is_initialized() { return state().initialized; }

void finalize() {
  State& s = state();
  if (!s.initialized) return;
  s.initialized = false;
  int mpi_ended = 0;
  MPI_Finalized(&mpi_ended);
  if (mpi_ended) return;
  if (s.broken) {
    // A rank that hangs would never reach MPI_Finalize, and the others would wait there.
    MPI_Abort(s.comm, 1);  // every rank of the group, launched together or joined by rendezvous
    return;
  }
  MPI_Comm_free(&s.comm);
  if (s.owns_mpi) MPI_Finalize();
  if (s.rendezvous) detail::finish(*s.rendezvous);
}

int rank() { return joined("dist::rank").rank; }
int world_size() { return joined("dist::world_size").size; }
int local_rank() { return joined("dist::local_rank").local_rank; }
int local_size() { return joined("dist::local_size").local_size; }
double timeout_seconds() { return joined("dist::timeout_seconds").timeout; }

void barrier() {
  State& s = ready("barrier");
  MPI_Request request;
  check_mpi(MPI_Ibarrier(s.comm, &request), "barrier");
  wait(request, "barrier");
}

namespace detail {

std::int64_t first_disagreement(std::span<const std::int64_t> values) {
  State& s = ready("dist");
  // The max of v and of -v on every rank: v is the same everywhere when max(v) == -max(-v).
  std::vector<std::int64_t> both(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    both[i] = values[i];
    both[values.size() + i] = values[i] == INT64_MIN ? INT64_MAX : -values[i];
  }
  check_count("dist", static_cast<std::int64_t>(both.size()));
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, both.data(), static_cast<int>(both.size()), MPI_INT64_T, MPI_MAX, s.comm, &request),
            "dist");
  wait(request, "dist");
  for (std::size_t i = 0; i < values.size(); ++i)
    if (both[i] != -both[values.size() + i]) return static_cast<std::int64_t>(i);
  return -1;
}

namespace {
void all_reduce_now(TensorData& data, ReduceOp op, bool spin) {
  State& s = ready("all_reduce");
  const MPI_Op mpi = mpi_op("all_reduce", op, data.dtype());
  check_count("all_reduce", data.numel());
  if (data.numel() == 0) return;
  ReduceBuffer buffer(data);
  arrive_then(s, "all_reduce", data.bytes().size(), spin, [&] {
    return MPI_Allreduce(MPI_IN_PLACE, buffer.pointer, static_cast<int>(data.numel()), mpi_type(data.dtype()).type, mpi,
                         s.comm);
  });
  buffer.finish(data, op == ReduceOp::mean ? s.size : 1);
}
}  // namespace

void all_reduce_unchecked(TensorData& data, ReduceOp op) { all_reduce_now(data, op, true); }

struct BackgroundReducer::Queue {
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<TensorData*, ReduceOp>> jobs;
  bool busy = false, stop = false;
  std::exception_ptr error;  // the first job's that failed; the jobs after it are dropped
  std::thread worker;

  void run() {
    std::unique_lock lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stop || !jobs.empty(); });
      if (jobs.empty()) return;  // stop
      const auto [data, op] = jobs.front();
      jobs.pop_front();
      busy = true;
      lock.unlock();
      std::exception_ptr failed;
      try {
        all_reduce_now(*data, op, /*spin=*/false);  // the caller's thread computes meanwhile
      } catch (...) {
        failed = std::current_exception();
      }
      lock.lock();
      busy = false;
      if (failed) {
        error = failed;
        jobs.clear();
      }
      changed.notify_all();
    }
  }
};

BackgroundReducer::BackgroundReducer() : queue_(std::make_unique<Queue>()) {}

BackgroundReducer::~BackgroundReducer() {
  {
    const std::lock_guard lock(queue_->mutex);
    queue_->stop = true;
    queue_->jobs.clear();
  }
  queue_->changed.notify_all();
  if (queue_->worker.joinable()) queue_->worker.join();
}

void BackgroundReducer::queue(TensorData& data, ReduceOp op) {
  ready("all_reduce");
  mpi_op("all_reduce", op, data.dtype());
  if (!kiln::dist::state().serialized) {  // MPI allows no second thread: reduce here and now
    all_reduce_now(data, op, true);
    return;
  }
  const std::lock_guard lock(queue_->mutex);
  if (!queue_->worker.joinable()) queue_->worker = std::thread([q = queue_.get()] { q->run(); });
  if (!queue_->error) queue_->jobs.emplace_back(&data, op);
  queue_->changed.notify_all();
}

void BackgroundReducer::wait_all() {
  std::unique_lock lock(queue_->mutex);
  queue_->changed.wait(lock, [&] { return queue_->jobs.empty() && !queue_->busy; });
  if (queue_->error) std::rethrow_exception(std::exchange(queue_->error, nullptr));
}

void arrive(std::string_view op, std::size_t bytes) { kiln::dist::arrive(ready(op), op, bytes, true); }

void broadcast_bytes(std::span<std::byte> bytes, int root) {
  State& s = ready("broadcast");
  KILN_CHECK(root >= 0 && root < s.size, "broadcast: root {} is not a rank of this group of {} (0 to {})", root, s.size,
             s.size - 1);
  check_count("broadcast", static_cast<std::int64_t>(bytes.size()));
  if (bytes.empty()) return;
  arrive_then(s, "broadcast", bytes.size(), true,
              [&] { return MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, root, s.comm); });
}

}  // namespace detail

void all_reduce(TensorData& data, ReduceOp op) {
  ready("all_reduce");
  mpi_op("all_reduce", op, data.dtype());  // the dtype / op checks before any communication
  check_same_tensor("all_reduce", data);
  detail::all_reduce_unchecked(data, op);
}

void broadcast(TensorData& data, int root) {
  const State& s = ready("broadcast");
  KILN_CHECK(root >= 0 && root < s.size, "broadcast: root {} is not a rank of this group of {} (0 to {})", root, s.size,
             s.size - 1);
  check_same_tensor("broadcast", data, root);
  detail::broadcast_bytes(data.bytes(), root);
}

TensorData all_gather(const TensorData& data) {
  State& s = ready("all_gather");
  KILN_CHECK(data.shape().rank() >= 1, "all_gather: needs a tensor of at least one dimension, got shape {}", data.shape());
  check_same_tensor("all_gather", data);
  const std::size_t bytes = data.bytes().size();
  check_count("all_gather", static_cast<std::int64_t>(bytes) * s.size);
  std::vector<std::int64_t> dims(data.shape().begin(), data.shape().end());
  dims[0] *= s.size;
  std::vector<std::byte> out(bytes * static_cast<std::size_t>(s.size));
  if (bytes > 0) {
    arrive_then(s, "all_gather", bytes, true, [&] {
      return MPI_Allgather(data.bytes().data(), static_cast<int>(bytes), MPI_BYTE, out.data(), static_cast<int>(bytes),
                           MPI_BYTE, s.comm);
    });
  }
  return TensorData(std::move(out), Shape(dims), data.dtype());
}

TensorData reduce_scatter(const TensorData& data, ReduceOp op) {
  State& s = ready("reduce_scatter");
  const MPI_Op mpi = mpi_op("reduce_scatter", op, data.dtype());
  KILN_CHECK(data.shape().rank() >= 1, "reduce_scatter: needs a tensor of at least one dimension, got shape {}",
             data.shape());
  check_same_tensor("reduce_scatter", data);
  KILN_CHECK(data.shape()[0] % s.size == 0, "reduce_scatter: dimension 0 of shape {} does not divide into {} ranks",
             data.shape(), s.size);
  check_count("reduce_scatter", data.numel());
  std::vector<std::int64_t> dims(data.shape().begin(), data.shape().end());
  dims[0] /= s.size;
  const std::int64_t part = data.numel() / s.size;
  TensorData in = data;
  ReduceBuffer buffer(in);
  TensorData out(std::vector<std::byte>(static_cast<std::size_t>(part) * dtype_size(data.dtype())), Shape(dims), data.dtype());
  ReduceBuffer result(out);
  if (part > 0) {
    arrive_then(s, "reduce_scatter", data.bytes().size(), true, [&] {
      return MPI_Reduce_scatter_block(buffer.pointer, result.pointer, static_cast<int>(part), mpi_type(data.dtype()).type,
                                      mpi, s.comm);
    });
  }
  result.finish(out, op == ReduceOp::mean ? s.size : 1);
  return out;
}

}  // namespace kiln::dist
