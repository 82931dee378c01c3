#include "snowflake/account_names.h"

#include <grp.h>
#include <pwd.h>

#include <fstream>
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

bool IsOverflowGroup(gid_t gid) {
  std::ifstream in("/proc/sys/kernel/overflowgid");
  long overflow = 65534;
  if (!(in >> overflow)) overflow = 65534;
  return static_cast<long>(gid) == overflow;
}

std::string GroupAccessAdvice(gid_t gid, const std::string& on_host) {
  if (IsOverflowGroup(gid)) {
    std::string advice = "the group shows as the overflow gid ";
    advice += std::to_string(gid);
    advice +=
        ", so this process runs in a user namespace that does not map the daemon's group: "
        "map that group into the namespace under its own number (podman --gidmap "
        "GID:GID:1, with the ranges around it) and give it to this process; joining a group "
        "inside the namespace cannot help";
    return advice;
  }
  std::string advice = on_host;
  advice += " (a container: run it with the group, e.g. podman --group-add ";
  advice += std::to_string(gid);
  advice += " or Kubernetes securityContext.supplementalGroups: [";
  advice += std::to_string(gid);
  advice += "])";
  return advice;
}

}  // namespace snowflake
