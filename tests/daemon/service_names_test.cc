#include "daemon/core/service_names.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace snowflake::daemon {
namespace {

TEST(ServiceNames, ValidNamesFollowTheClientRule) {
  EXPECT_TRUE(IsValidServiceName("orders"));
  EXPECT_TRUE(IsValidServiceName("billing.v2_eu-1"));
  EXPECT_TRUE(IsValidServiceName(std::string(63, 'a')));
  EXPECT_FALSE(IsValidServiceName(""));
  EXPECT_FALSE(IsValidServiceName(std::string(64, 'a')));
  EXPECT_FALSE(IsValidServiceName("Orders"));
  EXPECT_FALSE(IsValidServiceName("a b"));
  EXPECT_FALSE(IsValidServiceName("a:b"));
  EXPECT_FALSE(IsValidServiceName(std::string("a\0b", 3)));
}

TEST(ServiceNames, InvalidBytesAreShownAsHexThatSerialisesAsJson) {
  const std::string sut = ServiceNameForStatus("\xff\xfe" "A");

  EXPECT_EQ(sut, "invalid:fffe41");
  EXPECT_FALSE(IsValidServiceName(sut));  // can never pose as a real service
  const nlohmann::json object = {{sut, 1}};
  EXPECT_NO_THROW((void)object.dump());
}

TEST(ServiceNames, ValidNamesAreKeptAsTheyAre) {
  EXPECT_EQ(ServiceNameForStatus("orders"), "orders");
}

TEST(ServiceNames, TotalsStopGrowingAtTheBound) {
  std::map<std::string, uint64_t> totals;

  for (size_t i = 0; i < kMaxServiceNames + 500; ++i) {
    AddServiceCount(totals, "svc" + std::to_string(i), 1);
  }
  AddServiceCount(totals, "svc0", 1);  // a name already kept still counts on its own

  EXPECT_EQ(totals.size(), kMaxServiceNames + 1);
  EXPECT_EQ(totals[std::string(kOtherServices)], 500u);
  EXPECT_EQ(totals["svc0"], 2u);
}

}  // namespace
}  // namespace snowflake::daemon
