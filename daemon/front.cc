#include "daemon/front.h"

namespace snowflake::daemon {

Front::~Front() = default;

}  // namespace snowflake::daemon
