#include "daemon/fronts/front.h"

namespace snowflake::daemon {

Front::~Front() = default;

}  // namespace snowflake::daemon
