// A stand-in for snowflaked's control socket: listens on <dir>/control.sock (in place of
// a socket already there), answers one connection with a scripted reply line (or with
// nothing, to test a client's timeout) and remembers the request it got. For tests of the
// protocol's client end and of the commands that use it, where the reply must be one a real daemon
// would never send.

#ifndef SNOWFLAKE_TESTS_SUPPORT_SCRIPTED_CONTROL_SOCKET_H_
#define SNOWFLAKE_TESTS_SUPPORT_SCRIPTED_CONTROL_SOCKET_H_

#include <filesystem>
#include <optional>
#include <string>
#include <thread>

namespace snowflake::testing {

class ScriptedControlSocket {
 public:
  // `reply`: the line to send (without its newline) once a request line came; nullopt:
  // read the request and send nothing until the socket is destroyed.
  ScriptedControlSocket(const std::filesystem::path& dir, std::optional<std::string> reply);
  ~ScriptedControlSocket();
  ScriptedControlSocket(const ScriptedControlSocket&) = delete;
  ScriptedControlSocket& operator=(const ScriptedControlSocket&) = delete;

  // The request line received. Call after the client finished: it ends the server.
  const std::string& request();

 private:
  void Join();

  int fd_ = -1;
  int stop_[2] = {-1, -1};  // written to end a silent server
  std::optional<std::string> reply_;
  std::string request_;
  std::thread thread_;
};

}  // namespace snowflake::testing

#endif  // SNOWFLAKE_TESTS_SUPPORT_SCRIPTED_CONTROL_SOCKET_H_
