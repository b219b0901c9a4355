// PsClient's blocking administrative calls: one RPC to every server, in parallel.

#include <atomic>

#include "ps/client.h"
#include "ps/detail/client_call.h"

namespace fleet::ps {
namespace {

using SaveCall = detail::Call<proto::SaveRequest, proto::SaveLoadReply>;
using LoadCall = detail::Call<proto::LoadRequest, proto::SaveLoadReply>;
using ShrinkCall = detail::Call<proto::ShrinkRequest, proto::ShrinkReply>;
using StatsCall = detail::Call<proto::StatsRequest, proto::StatsReply>;
using HeartbeatCall = detail::Call<proto::HeartbeatRequest, proto::HeartbeatReply>;
using StopCall = detail::Call<proto::StopRequest, proto::StopReply>;

}  // namespace

absl::StatusOr<uint64_t> PsClient::Save(const std::string& dirname,
                                        std::optional<uint32_t> table_id, proto::SaveMode mode) {
  std::atomic<uint64_t> rows{0};
  auto status = CallAll<SaveCall>(
      "Save", options_.admin_timeout, FLEET_PS_STARTER(Save),
      [&](SaveCall* call) {
        call->request.set_dirname(dirname);
        call->request.set_all_tables(!table_id.has_value());
        call->request.set_table_id(table_id.value_or(0));
        call->request.set_mode(mode);
      },
      [&](size_t, const proto::SaveLoadReply& reply) {
        rows += reply.rows();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return rows.load();
}

absl::StatusOr<uint64_t> PsClient::Load(const std::string& dirname,
                                        std::optional<uint32_t> table_id) {
  std::atomic<uint64_t> rows{0};
  auto status = CallAll<LoadCall>(
      "Load", options_.admin_timeout, FLEET_PS_STARTER(Load),
      [&](LoadCall* call) {
        call->request.set_dirname(dirname);
        call->request.set_all_tables(!table_id.has_value());
        call->request.set_table_id(table_id.value_or(0));
      },
      [&](size_t, const proto::SaveLoadReply& reply) {
        rows += reply.rows();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return rows.load();
}

absl::StatusOr<uint64_t> PsClient::Shrink(uint32_t table_id, uint32_t max_unseen_saves) {
  std::atomic<uint64_t> removed{0};
  auto status = CallAll<ShrinkCall>(
      "Shrink", options_.admin_timeout, FLEET_PS_STARTER(Shrink),
      [&](ShrinkCall* call) {
        call->request.set_table_id(table_id);
        call->request.set_max_unseen_saves(max_unseen_saves);
      },
      [&](size_t, const proto::ShrinkReply& reply) {
        removed += reply.rows_removed();
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return removed.load();
}

absl::StatusOr<std::vector<std::vector<proto::TableStats>>> PsClient::Stats() {
  std::vector<std::vector<proto::TableStats>> stats(stubs_.size());
  auto status = CallAll<StatsCall>(
      "Stats", options_.rpc_timeout, FLEET_PS_STARTER(Stats), [](StatsCall*) {},
      [&](size_t s, const proto::StatsReply& reply) {
        stats[s].assign(reply.tables().begin(), reply.tables().end());
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  return stats;
}

absl::Status PsClient::Heartbeat() {
  return CallAll<HeartbeatCall>(
      "Heartbeat", options_.rpc_timeout, FLEET_PS_STARTER(Heartbeat), [](HeartbeatCall*) {},
      [](size_t, const proto::HeartbeatReply&) { return absl::OkStatus(); });
}

absl::Status PsClient::StopServers() {
  return CallAll<StopCall>(
      "Stop", options_.rpc_timeout, FLEET_PS_STARTER(Stop), [](StopCall*) {},
      [](size_t, const proto::StopReply&) { return absl::OkStatus(); });
}

}  // namespace fleet::ps
