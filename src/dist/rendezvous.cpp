// The launcher-free start of src/dist/rendezvous.hpp.
#include "rendezvous.hpp"

#include "kiln/core/error.hpp"
#include "store/atomic_file.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <span>
#include <sstream>
#include <string_view>
#include <thread>

namespace kiln::dist::detail {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

pid_t server_pid = -1;  // rank 0's ompi-server


// Whether a launcher started this process: Open MPI's mpirun, or a PMI/PMIx one (srun, MPICH).
bool under_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(name)) return true;
  return false;
}

std::string read_whole(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes `text` to `file` whole: a reader never sees part of it.
void publish(const fs::path& file, const std::string& text) {
  store::detail::AtomicFile out(file, "dist::init (KILN_DIST_RENDEZVOUS)");
  out.write(std::as_bytes(std::span(text.data(), text.size())));
  out.commit();
}

// The first line of `file` once it holds a whole one, waiting up to the deadline.
std::string await_line(const fs::path& file, Clock::time_point deadline, std::string_view what, const Rendezvous& r) {
  for (;;) {
    const std::string text = read_whole(file);
    if (const auto end = text.find('\n'); end != std::string::npos) return text.substr(0, end);
    KILN_CHECK(Clock::now() < deadline,
               "dist::init: rank {} of KILN_WORLD_SIZE={} waited for {} in {} (rank 0 writes it; KILN_DIST_RENDEZVOUS "
               "must be a path every rank sees), past KILN_DIST_TIMEOUT",
               r.rank, r.size, what, file.string());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

fs::path server_file(const Rendezvous& r) { return r.path + ".server"; }
fs::path port_file(const Rendezvous& r) { return r.path + ".port"; }

}  // namespace

std::optional<long> whole_number_env(const char* name) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  KILN_CHECK(end && *end == '\0' && value >= 0, "dist::init: {} must be a whole number, got '{}'", name,
             std::string_view(text));
  return value;
}

std::optional<Rendezvous> launcher_free() {
  const auto size = whole_number_env("KILN_WORLD_SIZE"), rank = whole_number_env("KILN_RANK");
  if (!size || *size <= 1 || under_launcher()) return std::nullopt;
  KILN_CHECK(rank.has_value() && *rank < *size, "dist::init: KILN_WORLD_SIZE is {} but KILN_RANK is {}; set KILN_RANK to "
             "this process's rank, 0 to {}", *size, rank ? std::to_string(*rank) : std::string("not set"), *size - 1);
  const char* path = std::getenv("KILN_DIST_RENDEZVOUS");
  KILN_CHECK(path && *path,
             "dist::init: KILN_WORLD_SIZE={} without an MPI launcher needs KILN_DIST_RENDEZVOUS, a file path every rank "
             "can read and rank 0 can write (or start the job with mpirun -np {} or srun)",
             *size, *size);
  return Rendezvous{static_cast<int>(*rank), static_cast<int>(*size), path};
}

void prepare(const Rendezvous& r, double timeout) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
  if (r.rank == 0) {
    std::error_code ignored;
    fs::remove(server_file(r), ignored);
    fs::remove(port_file(r), ignored);
    const fs::path reported = r.path + ".server-uri";
    fs::remove(reported, ignored);
    server_pid = fork();
    KILN_CHECK(server_pid >= 0, "dist::init: cannot start ompi-server (fork failed)");
    if (server_pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);  // it ends with rank 0, however rank 0 ends
      setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
      setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
      const std::string uri = reported.string();
      execlp("ompi-server", "ompi-server", "--no-daemonize", "--report-uri", uri.c_str(), static_cast<char*>(nullptr));
      std::fprintf(stderr, "kiln: dist::init: cannot run ompi-server (apt-get install openmpi-bin)\n");
      std::_Exit(127);
    }
    const std::string uri = await_line(reported, deadline, "ompi-server's address", r);
    publish(server_file(r), uri + "\n");
  }
  (void)await_line(server_file(r), deadline, "rank 0's ompi-server address", r);
  setenv("OMPI_MCA_pmix_server_uri", ("file:" + server_file(r).string()).c_str(), 1);
}

MPI_Comm join(const Rendezvous& r, double timeout) {
  // MPI_Comm_accept and MPI_Comm_connect cannot be given up on: past the timeout a watchdog
  // ends this process with the error, so that a rank that never comes hangs nobody.
  std::mutex mutex;
  std::condition_variable joined;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!joined.wait_for(lock, std::chrono::duration<double>(timeout), [&] { return done; })) {
      std::fprintf(stderr,
                   "kiln::Error: dist::init: rank %d waited %g s (KILN_DIST_TIMEOUT) for the other ranks of "
                   "KILN_WORLD_SIZE=%d to join through KILN_DIST_RENDEZVOUS=%s: a rank did not start, or cannot reach "
                   "rank 0\n",
                   r.rank, timeout, r.size, r.path.c_str());
      std::fflush(stderr);
      finish(r);
      std::_Exit(1);
    }
  });
  const auto finish_watch = [&] {
    {
      const std::lock_guard lock(mutex);
      done = true;
    }
    joined.notify_all();
    watchdog.join();
  };
  try {
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout));
    char port[MPI_MAX_PORT_NAME] = {};
    MPI_Comm group = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_SELF, &group);
    if (r.rank == 0) {
      KILN_CHECK(MPI_Open_port(MPI_INFO_NULL, port) == MPI_SUCCESS, "dist::init: MPI_Open_port failed");
      publish(port_file(r), std::string(port) + "\n");
    } else {
      const std::string name = await_line(port_file(r), deadline, "rank 0's MPI port", r);
      KILN_CHECK(MPI_Comm_connect(name.c_str(), MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter) == MPI_SUCCESS,
                 "dist::init: rank {} could not connect to rank 0's MPI port {}", r.rank, name);
      MPI_Comm_free(&group);
      MPI_Intercomm_merge(inter, 1, &group);
      MPI_Comm_free(&inter);
    }
    // Every rank that has joined takes part in accepting the next one (rank 0 stays 0).
    for (int size = 0; MPI_Comm_size(group, &size) == MPI_SUCCESS && size < r.size;) {
      KILN_CHECK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, group, &inter) == MPI_SUCCESS,
                 "dist::init: accepting rank {} of {} failed", size, r.size);
      MPI_Comm next = MPI_COMM_NULL;
      MPI_Intercomm_merge(inter, 0, &next);
      MPI_Comm_free(&inter);
      MPI_Comm_free(&group);
      group = next;
    }
    if (r.rank == 0) MPI_Close_port(port);
    // The ranks joined in the order they came: number them by KILN_RANK.
    MPI_Comm ordered = MPI_COMM_NULL;
    MPI_Comm_split(group, 0, r.rank, &ordered);
    MPI_Comm_free(&group);
    finish_watch();
    return ordered;
  } catch (...) {
    finish_watch();
    throw;
  }
}

void finish(const Rendezvous& r) {
  if (r.rank != 0) return;
  if (server_pid > 0) {
    kill(server_pid, SIGTERM);
    waitpid(server_pid, nullptr, 0);
    server_pid = -1;
  }
  std::error_code ignored;
  for (const fs::path& file : {server_file(r), port_file(r), fs::path(r.path + ".server-uri")}) fs::remove(file, ignored);
}

}  // namespace kiln::dist::detail
