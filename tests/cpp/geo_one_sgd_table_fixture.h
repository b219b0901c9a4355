#pragma once
// The set-up the GEO tests of one worker's rows against a real server share: one server on
// loopback with one sparse table of rows of kDim floats, zero at first, updated by SGD at rate 1
// (a unit gradient steps a value by -1), a client connected to it, and the worker's LocalRows of
// that table under the same rule.

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "distributed/detail/local_rows.h"
#include "ps_loopback_servers.h"
#include "update_rules_for_tests.h"

namespace fleet::distributed::detail::testing_geo {

class OneSgdTableTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kTable = 1;
  static constexpr size_t kDim = 2;

  // Subclasses that set up more call this first (and stop on its fatal failure).
  void SetUp() override {
    ps::testing_servers::StartServersAndConnect(
        ps::testing_servers::ServersOfOneSgdSparseTable(1, kTable, "emb", kDim, 1.0f), &servers_,
        &client_);
  }

  std::vector<std::unique_ptr<ps::PsServer>> servers_;
  std::unique_ptr<ps::PsClient> client_;
  LocalRows local_{kDim, ps::testing_rules::SgdRule(1.0f)};
};

}  // namespace fleet::distributed::detail::testing_geo
