// For the file readers of libkiln_store and libkiln_data: a file is read only when it is a
// regular one, whose size is known before reading. A FIFO would block a reader until some
// writer came, a device would never end. Private to src/.
#pragma once

#include "kiln/core/error.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

namespace kiln::detail {

// What a file that is not a regular one is, for errors.
inline const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a file of an unknown kind";
}

// The size of the open file `fd`; a kiln::Error when it is not a regular file: "<what>: is a
// FIFO (named pipe), not a regular file; <advice>". `what` names the file ("<path>", or
// "<reader>: <path>").
inline std::size_t regular_file_size(int fd, const std::string& what, std::string_view advice) {
  struct stat info {};
  KILN_CHECK(::fstat(fd, &info) == 0, "{}: cannot read its size: {}", what, std::strerror(errno));
  KILN_CHECK(!S_ISDIR(info.st_mode), "{}: is a directory, not a file", what);
  KILN_CHECK(S_ISREG(info.st_mode), "{}: is {}, not a regular file; {}", what, file_kind(info.st_mode), advice);
  return static_cast<std::size_t>(info.st_size);
}

}  // namespace kiln::detail
