#include "snowflake/account_names.h"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace snowflake {

std::string UserName(uid_t uid) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return std::to_string(uid);
}

std::string GroupName(gid_t gid) {
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->gr_name;
  }
  return std::to_string(gid);
}

std::string DescribeUser(uid_t uid) {
  const std::string name = UserName(uid);
  const std::string number = std::to_string(uid);
  return name == number ? "uid " + number : name + " (uid " + number + ")";
}

std::string DescribeGroupName(gid_t gid) {
  const std::string name = GroupName(gid);
  const std::string number = std::to_string(gid);
  return name == number ? "gid " + number : name + " (gid " + number + ")";
}

}  // namespace snowflake
