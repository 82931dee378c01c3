// Crash-safe replacement of a small file: after a crash at any instruction the path holds
// either the old contents or the new, completely, and a completed call is durable.

#ifndef SNOWFLAKE_UTIL_ATOMIC_FILE_H_
#define SNOWFLAKE_UTIL_ATOMIC_FILE_H_

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "util/file_system.h"

namespace snowflake::util {

// Writes `contents` to a temporary file beside `path`, fsyncs it, renames it over `path`
// and fsyncs the directory. Thread-safe for distinct paths; callers serialise writers of
// one path (the temporary name is per process).
// Both fsyncs go through `fs` (the real filesystem by default).
// Errors: a message naming the step, the path and errno's text (errno is left set);
// `path` is then unchanged.
[[nodiscard]] tl::expected<void, std::string> WriteFileAtomically(
    const std::filesystem::path& path, std::string_view contents, mode_t mode = 0644,
    FileSystem& fs = FileSystem::Default()) noexcept;

// Reads a whole file. Errors: a message naming the path and errno's text; *missing is set
// when the error is that the file does not exist.
[[nodiscard]] tl::expected<std::string, std::string> ReadWholeFile(
    const std::filesystem::path& path, bool* missing = nullptr) noexcept;

}  // namespace snowflake::util

#endif  // SNOWFLAKE_UTIL_ATOMIC_FILE_H_
