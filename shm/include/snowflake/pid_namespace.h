// The pid namespace a process runs in, as the inode number of /proc/self/ns/pid. The
// daemon records its own in the segment header (line 4, shm/LAYOUT.md) so that a client
// knows whether the daemon's pid means anything to it: a client in a container that
// shares the host's runtime directory runs in another pid namespace, where kill(pid, 0)
// answers ESRCH for a live daemon. Namespace inodes are unique within a boot, and the
// header's boot id already says whether the segment is of this boot.
//
// Thread-safe: CurrentPidNamespace() reads the link once per process (a function-local
// static; a process cannot leave its pid namespace).

#ifndef SNOWFLAKE_PID_NAMESPACE_H_
#define SNOWFLAKE_PID_NAMESPACE_H_

#include <cstdint>

namespace snowflake::shm {

// This process's pid namespace: the inode of /proc/self/ns/pid, or 0 if it cannot be
// read (no /proc). 0 always means "not known".
uint32_t CurrentPidNamespace() noexcept;

}  // namespace snowflake::shm

#endif  // SNOWFLAKE_PID_NAMESPACE_H_
