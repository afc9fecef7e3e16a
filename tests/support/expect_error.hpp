// EXPECT_KILN_ERROR(statement, "part", ...): the statement must throw a kiln::Error whose
// message contains every part (the op's name, the shapes or bytes at fault). Header-only,
// for test binaries with or without the test support library.
#pragma once

#include <kiln/core/error.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

namespace kiln::test {

inline void expect_error(const std::function<void()>& body, std::initializer_list<std::string_view> parts) {
  try {
    body();
    ADD_FAILURE() << "no kiln::Error was thrown";
  } catch (const Error& error) {
    const std::string message = error.what();
    for (const std::string_view part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "the message\n  " << message << "\nlacks\n  " << part;
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw something other than kiln::Error: " << error.what();
  }
}

}  // namespace kiln::test

#define EXPECT_KILN_ERROR(statement, ...)                                  \
  do {                                                                     \
    SCOPED_TRACE(#statement);                                              \
    ::kiln::test::expect_error([&] { (void)(statement); }, {__VA_ARGS__}); \
  } while (0)
