// Passing a descriptor with bytes on a Unix socket (SCM_RIGHTS), written once: the control
// server's `attach` reply sends the consumer region this way, and the control client, the
// conformance fixture and the tests that play either end use the same two calls.
//
// Both are thin: one sendmsg(2) or recvmsg(2), errno as the call left it. Thread-safe as
// the system calls are.

#ifndef SNOWFLAKE_PROTOCOL_DESCRIPTOR_PASSING_H_
#define SNOWFLAKE_PROTOCOL_DESCRIPTOR_PASSING_H_

#include <sys/types.h>

#include <span>
#include <string_view>
#include <vector>

#include "snowflake/unique_fd.h"

namespace snowflake::protocol {

// The most descriptors one receive keeps; the kernel closes any beyond them (MSG_CTRUNC).
// A reply of the protocol carries one; a hostile peer may send more.
inline constexpr int kMaxDescriptorsPerMessage = 4;

// Sends `bytes` with `descriptor` attached to their first byte (sendmsg, SCM_RIGHTS), or
// plainly (send) when descriptor < 0. The kernel holds its own copy of the descriptor once
// any byte is sent; the caller still owns `descriptor`. Returns the bytes sent, or -1 with
// errno (EAGAIN with MSG_DONTWAIT in `flags`).
ssize_t SendWithDescriptor(int socket, std::string_view bytes, int descriptor, int flags);

// Receives into `buffer` (recvmsg, MSG_CMSG_CLOEXEC added to `flags`). Every descriptor
// that came with the bytes is appended to *descriptors, close-on-exec, or closed when
// `descriptors` is null. Returns the bytes received, 0 at the peer's end, or -1 with errno.
ssize_t ReceiveWithDescriptors(int socket, std::span<char> buffer,
                               std::vector<UniqueFd>* descriptors, int flags = 0);

}  // namespace snowflake::protocol

#endif  // SNOWFLAKE_PROTOCOL_DESCRIPTOR_PASSING_H_
