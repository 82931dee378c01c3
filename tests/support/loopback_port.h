#ifndef SNOWFLAKE_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define SNOWFLAKE_TESTS_SUPPORT_LOOPBACK_PORT_H_

namespace snowflake::testing {

// A TCP port on 127.0.0.1 that was free a moment ago, for a server a test starts (etcd,
// the daemon's HTTP front), or 0 if none was found.
//
// It is drawn at random below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), never by binding port 0: a port the kernel
// picks for bind(0) is also one it hands to outgoing connections as their source port, so
// on a busy host another process's connection can take it before the server binds it.
// Below the range, only another server that draws the same port can, which a test
// survives by drawing again.
int FreeLoopbackPort();

// The lowest port of the kernel's ephemeral range (32768 if unreadable).
int EphemeralPortFloor();

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_LOOPBACK_PORT_H_
