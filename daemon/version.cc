#include "daemon/version.h"

// Set for this file alone (daemon/CMakeLists.txt): a new version recompiles one file.
#ifndef SNOWFLAKE_VERSION
#define SNOWFLAKE_VERSION "0.0.0"
#endif

namespace snowflake::daemon {

std::string_view SnowflakedVersion() noexcept { return SNOWFLAKE_VERSION; }

}  // namespace snowflake::daemon
