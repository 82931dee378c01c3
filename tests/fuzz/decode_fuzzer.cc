// libFuzzer target: `snowflakectl decode` argument parsing (cli/decode_command.h), both
// the parsers alone and the whole subcommand through CLI11 as main() runs it.
// Input: NUL-separated arguments (at most 16).
// Property: RunDecode either prints exactly one line per ID and nothing on stderr, or
// nothing on stdout and at least one line on stderr; nothing crashes.

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "decode_command.h"

namespace {

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
};

size_t Lines(const std::string& text) {
  size_t n = 0;
  for (const char c : text) n += c == '\n';
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (size_t start = 0; start <= input.size() && args.size() < 16;) {
    const size_t end = std::min(input.find('\0', start), input.size());
    args.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }

  // The parsers and the formatter alone.
  snowflake::cli::DecodeRequest request;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i == 0 && !args[0].empty() && args[0][0] == 'E') {
      request.has_epoch = true;
      request.epoch = args[0].substr(1);
    } else {
      request.ids.push_back(args[i]);
    }
  }
  request.json = size % 2 == 0;
  std::ostringstream out, err;
  const int status = snowflake::cli::RunDecode(request, out, err);
  // Success prints one line per ID (stderr may name the epoch used); an error is never
  // silent: a line on `err`, or with --json one error object on `out`, and never IDs.
  if (status == 0) {
    if (Lines(out.str()) != request.ids.size()) __builtin_trap();
  } else if (request.json ? Lines(out.str()) > 1 || (out.str().empty() && err.str().empty())
                          : !out.str().empty() || err.str().empty()) {
    __builtin_trap();
  }

  // The whole subcommand as snowflakectl parses its command line.
  static NullBuffer null_buffer;
  std::streambuf* saved_out = std::cout.rdbuf(&null_buffer);
  std::streambuf* saved_err = std::cerr.rdbuf(&null_buffer);
  CLI::App app("snowflakectl");
  snowflake::cli::AddDecodeCommand(app);
  std::vector<std::string> argv_text = {"snowflakectl", "decode"};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<const char*> argv;
  for (const std::string& a : argv_text) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error& e) {
    (void)app.exit(e, std::cout, std::cerr);
  }
  std::cout.rdbuf(saved_out);
  std::cerr.rdbuf(saved_err);
  return 0;
}
