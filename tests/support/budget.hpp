// The resource budget of a reader facing a hostile file: a file of at most 1 MiB must be
// refused (a kiln::Error) or read within 1 s of CPU time and 100 MiB of memory. Each read
// runs in a forked child, so that a crash, a hang or a runaway allocation is a failure of
// this one case and the numbers are the child's alone: CPU time from
// CLOCK_PROCESS_CPUTIME_ID, memory as the growth of the peak resident set (VmHWM, reset
// through /proc/self/clear_refs before the read) over the resident set at its start,
// after the heap's free pages went back to the system (malloc_trim).
// Under a sanitizer, whose shadow memory and checks change both numbers, only the
// outcome is checked.
#pragma once

#include <kiln/core/error.hpp>

#include <gtest/gtest.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <string_view>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KILN_TEST_SANITIZED 1
#endif
#endif

namespace kiln::test {

inline constexpr std::size_t hostile_file_max_bytes = std::size_t{1} << 20;
inline constexpr double budget_cpu_seconds = 1.0;
inline constexpr std::int64_t budget_memory_bytes = std::int64_t{100} << 20;

// One measured read.
struct ReadUse {
  enum class Outcome { read, refused, other_exception, crashed, hung } outcome = Outcome::crashed;
  std::string message;  // the kiln::Error's (or other exception's) text, cut to 2000 bytes
  double cpu_seconds = 0;
  std::int64_t memory_bytes = 0;  // peak resident set growth
};

namespace detail {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM").
inline std::int64_t status_bytes(std::string_view field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with(field) && line.size() > field.size() && line[field.size()] == ':')
      return std::stoll(line.substr(field.size() + 1)) * 1024;
  return -1;
}

inline double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct ChildReport {
  int outcome;
  double cpu_seconds;
  std::int64_t memory_bytes;
  char message[2000];
};

}  // namespace detail

// Runs `read` in a forked child and measures it. gtest assertions inside `read` are lost
// with the child: it reports a wrong result by throwing something other than a
// kiln::Error (Outcome::other_exception). A child still running after
// `wall_limit_seconds` is killed and reported as hung.
inline ReadUse measure_read(const std::function<void()>& read, int wall_limit_seconds = 60) {
  int fds[2];
  if (pipe(fds) != 0) return {ReadUse::Outcome::crashed, "pipe failed"};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    ::close(fds[0]);
    detail::ChildReport report{};
    malloc_trim(0);  // the parent's free heap pages would otherwise hide allocations
    {
      std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    }
    const std::int64_t start = detail::status_bytes("VmRSS");
    const double cpu = detail::cpu_now();
    ReadUse::Outcome outcome = ReadUse::Outcome::read;
    std::string message;
    try {
      read();
    } catch (const kiln::Error& e) {
      outcome = ReadUse::Outcome::refused;
      message = e.what();
    } catch (const std::exception& e) {
      outcome = ReadUse::Outcome::other_exception;
      message = e.what();
    }
    report.cpu_seconds = detail::cpu_now() - cpu;
    report.memory_bytes = detail::status_bytes("VmHWM") - start;
    report.outcome = static_cast<int>(outcome);
    std::strncpy(report.message, message.c_str(), sizeof report.message - 1);
    [[maybe_unused]] const auto written = ::write(fds[1], &report, sizeof report);
    _exit(0);  // no atexit handlers or static destructors of the parent's state
  }
  ::close(fds[1]);
  ReadUse use;
  pollfd wait_for{fds[0], POLLIN, 0};
  if (::poll(&wait_for, 1, wall_limit_seconds * 1000) == 0) {
    ::kill(pid, SIGKILL);
    use.outcome = ReadUse::Outcome::hung;
  } else {
    detail::ChildReport report{};
    if (::read(fds[0], &report, sizeof report) == static_cast<ssize_t>(sizeof report)) {
      use.outcome = static_cast<ReadUse::Outcome>(report.outcome);
      use.cpu_seconds = report.cpu_seconds;
      use.memory_bytes = report.memory_bytes;
      use.message = report.message;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (use.outcome == ReadUse::Outcome::crashed)
    use.message = WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                      : "exited with status " + std::to_string(WEXITSTATUS(status));
  return use;
}

// Checks that reading the hostile file `what` of `file_bytes` bytes stays within the
// budget and ends in `expected` (read or refused); a refusal must name `expect_in_message`.
inline void expect_within_budget(std::string_view what, std::size_t file_bytes, ReadUse::Outcome expected,
                                 const std::function<void()>& read, std::string_view expect_in_message = {}) {
  SCOPED_TRACE(std::string(what));
  ASSERT_LE(file_bytes, hostile_file_max_bytes) << "the hostile file is larger than 1 MiB";
  const ReadUse use = measure_read(read);
  const char* names[] = {"read", "refused", "another exception", "crashed", "hung"};
  EXPECT_EQ(use.outcome, expected) << "got: " << names[static_cast<int>(use.outcome)] << " (" << use.message
                                   << "), expected: " << names[static_cast<int>(expected)];
  if (!expect_in_message.empty()) EXPECT_NE(use.message.find(expect_in_message), std::string::npos) << use.message;
  std::printf("  budget: %-58s %8zu bytes  %-8s %7.3f s CPU  %7.1f MiB\n", std::string(what).c_str(), file_bytes,
              names[static_cast<int>(use.outcome)], use.cpu_seconds,
              static_cast<double>(use.memory_bytes) / (1 << 20));
#ifndef KILN_TEST_SANITIZED
  EXPECT_LT(use.cpu_seconds, budget_cpu_seconds);
  EXPECT_LT(use.memory_bytes, budget_memory_bytes);
#endif
}

}  // namespace kiln::test
