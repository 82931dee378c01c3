#include "protocol/descriptor_passing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace snowflake::protocol {

ssize_t SendWithDescriptor(int socket, std::string_view bytes, int descriptor, int flags) {
  if (descriptor < 0) return send(socket, bytes.data(), bytes.size(), flags);
  iovec io{.iov_base = const_cast<char*>(bytes.data()), .iov_len = bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &descriptor, sizeof(int));
  return sendmsg(socket, &message, flags);
}

ssize_t ReceiveWithDescriptors(int socket, std::span<char> buffer,
                               std::vector<UniqueFd>* descriptors, int flags) {
  iovec io{.iov_base = buffer.data(), .iov_len = buffer.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(kMaxDescriptorsPerMessage * sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(socket, &message, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (descriptors != nullptr) {
        descriptors->emplace_back(fd);
      } else {
        close(fd);
      }
    }
  }
  return n;
}

}  // namespace snowflake::protocol
