// A directory under $TMPDIR (or /tmp) that exists for the object's lifetime and is
// removed with everything in it when the object is destroyed.
#ifndef SNOWFLAKE_TESTS_SUPPORT_TEMP_DIR_H_
#define SNOWFLAKE_TESTS_SUPPORT_TEMP_DIR_H_

#include <filesystem>
#include <string_view>

namespace snowflake::testing {

class TempDir {
 public:
  explicit TempDir(std::string_view prefix = "snowflake-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_TEMP_DIR_H_
