// Users and groups as people know them: by name, the number in parentheses, for every
// error message that asks someone to join a group or run as a user. Not part of the
// installed API.
//
// Thread-safe (getpwuid_r / getgrgid_r).

#ifndef SNOWFLAKE_ACCOUNT_NAMES_H_
#define SNOWFLAKE_ACCOUNT_NAMES_H_

#include <sys/types.h>

#include <string>

namespace snowflake {

// "alice (uid 1000)", or "uid 1000" when no user has that number.
std::string DescribeUser(uid_t uid);

// "snowflaked (gid 997)", or "gid 997" when no group has that number.
std::string DescribeGroupName(gid_t gid);

// The bare name of a user or group, or the number as text when it has none.
std::string UserName(uid_t uid);
std::string GroupName(gid_t gid);

// True if `gid` is the kernel's overflow group (/proc/sys/kernel/overflowgid, 65534): the
// number a file's group shows as inside a user namespace that does not map it. Joining
// that group gives nothing; the namespace must map the real one.
bool IsOverflowGroup(gid_t gid);

// The advice for a process refused by a file whose group is `gid`: in a user namespace
// that does not map the group, to map it (no group membership can help); otherwise to be
// given the group: `on_host` (how a user on the host joins it), then how a container does.
std::string GroupAccessAdvice(gid_t gid, const std::string& on_host);

}  // namespace snowflake

#endif  // SNOWFLAKE_ACCOUNT_NAMES_H_
