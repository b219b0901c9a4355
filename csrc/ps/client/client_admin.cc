// PsClient's blocking administrative calls: one RPC to every server, in parallel.

#include <algorithm>
#include <atomic>

#include "ps/client/client.h"
#include "ps/client/detail/client_call.h"
#include "ps/save_names.h"

namespace fleet::ps {
namespace {

using SaveCall = detail::Call<proto::SaveRequest, proto::SaveLoadReply>;
using CommitCall = detail::Call<proto::CommitSaveRequest, proto::CommitSaveReply>;
using LoadCall = detail::Call<proto::LoadRequest, proto::SaveLoadReply>;
using ShrinkCall = detail::Call<proto::ShrinkRequest, proto::ShrinkReply>;
using StatsCall = detail::Call<proto::StatsRequest, proto::StatsReply>;
using HeartbeatCall = detail::Call<proto::HeartbeatRequest, proto::HeartbeatReply>;
using StopCall = detail::Call<proto::StopRequest, proto::StopReply>;
using BarrierCall = detail::Call<proto::BarrierRequest, proto::BarrierReply>;

}  // namespace

absl::StatusOr<uint64_t> PsClient::Save(const std::string& dirname,
                                        std::optional<uint32_t> table_id, proto::SaveMode mode,
                                        bool end_save_cycle) {
  if (auto s = CheckUsable("Save"); !s.ok()) return s;
  if (auto s = CheckDirname(dirname, "Save"); !s.ok()) return s;
  const std::string save_id = NewSaveId();
  const std::string what = absl::StrCat("Save to ", dirname);
  // Phase one: every server writes its parts under the save id.
  std::vector<std::vector<proto::CheckpointFile>> files(num_servers());
  uint64_t rows = 0;
  absl::Mutex mu;
  auto status = CallAll<SaveCall>(
      what, options_.admin_timeout, FLEET_PS_STARTER(Save),
      [&](SaveCall* call) {
        call->request.set_dirname(dirname);
        call->request.set_all_tables(!table_id.has_value());
        call->request.set_table_id(table_id.value_or(0));
        call->request.set_mode(mode);
        call->request.set_keep_cycle(!end_save_cycle);
        call->request.set_save_id(save_id);
      },
      [&](size_t s, const proto::SaveLoadReply& reply) {
        absl::MutexLock lock(&mu);
        rows += reply.rows();
        files[s].assign(reply.files().begin(), reply.files().end());
        return absl::OkStatus();
      });
  if (!status.ok()) return status;
  // Phase two: server 0 commits the manifest; only then do the others count the save as done
  // for their next delta save (so a failed commit leaves every server's delta intact).
  proto::CommitSaveRequest commit;
  commit.set_dirname(dirname);
  commit.set_save_id(save_id);
  commit.set_num_servers(static_cast<uint32_t>(num_servers()));
  for (auto& server_files : files) {
    for (auto& file : server_files) *commit.add_files() = std::move(file);
  }
  std::vector<size_t> others;
  for (size_t s = 1; s < num_servers(); ++s) others.push_back(s);
  for (const std::vector<size_t>& servers : {std::vector<size_t>{0}, others}) {
    status = CallServers<CommitCall>(
        absl::StrCat("Commit of the save to ", dirname), options_.admin_timeout, servers,
        FLEET_PS_STARTER(CommitSave),
        [&](CommitCall* call) {
          call->request = commit;
          call->request.set_write_manifest(servers.front() == 0);
        },
        [](size_t, const proto::CommitSaveReply&) { return absl::OkStatus(); });
    if (!status.ok()) return status;
  }
  return rows;
}

absl::StatusOr<uint64_t> PsClient::Load(const std::string& dirname,
                                        std::optional<uint32_t> table_id) {
  if (auto s = CheckUsable("Load"); !s.ok()) return s;
  if (auto s = CheckDirname(dirname, "Load"); !s.ok()) return s;
  std::atomic<uint64_t> rows{0};
  auto status = CallAll<LoadCall>(
      absl::StrCat("Load from ", dirname), options_.admin_timeout, FLEET_PS_STARTER(Load),
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
  if (auto s = CheckUsable("Shrink"); !s.ok()) return s;
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
  if (auto s = CheckUsable("Stats"); !s.ok()) return s;
  std::vector<std::vector<proto::TableStats>> stats(num_servers());
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
  if (auto s = CheckUsable("Heartbeat"); !s.ok()) return s;
  return CallAll<HeartbeatCall>(
      "Heartbeat", options_.rpc_timeout, FLEET_PS_STARTER(Heartbeat), [](HeartbeatCall*) {},
      [](size_t, const proto::HeartbeatReply&) { return absl::OkStatus(); });
}

absl::Status PsClient::ReportFailure(uint32_t worker_id, const std::string& why) {
  // A frozen server would hold the report for its whole deadline, and a dead one cannot be
  // told: both are left out. A server that did not answer the failing call has either failed
  // itself or will see this worker's presence call drop when its process exits.
  std::vector<size_t> answering;
  {
    absl::MutexLock lock(&incarnations_->mu);
    for (size_t s = 0; s < num_servers(); ++s) {
      if (!incarnations_->unresponsive[s]) answering.push_back(s);
    }
  }
  return CallServers<BarrierCall>(
      "report of the worker's failure", std::min(options_.rpc_timeout, absl::Seconds(5)), answering,
      FLEET_PS_STARTER(Barrier),
      [&](BarrierCall* call) {
        call->request.set_worker_id(worker_id);
        call->request.set_failure(why.empty() ? "no reason given" : why);
      },
      [](size_t, const proto::BarrierReply&) { return absl::OkStatus(); });
}

void PsClient::Attend(uint32_t worker_id) {
  {
    absl::MutexLock lock(&presence_->mu);
    if (!presence_->calls.empty() || presence_->ending || state_.load() != kOpen) return;
    presence_->worker_id = worker_id;
  }
  for (size_t s = 0; s < num_servers(); ++s) StartPresence(s, false, false);
}

void PsClient::StartPresence(size_t server, bool counted, bool wait_for_server) {
  BarrierCall* call = nullptr;
  {
    absl::MutexLock lock(&presence_->mu);
    if (presence_->ending) {
      if (counted) --presence_->open;  // EndPresence waits for this count
      return;
    }
    auto owned = std::make_unique<BarrierCall>();
    call = owned.get();
    if (!options_.job_id.empty()) call->context.AddMetadata(detail::kJobIdKey, options_.job_id);
    call->context.set_wait_for_ready(wait_for_server);
    call->request.set_worker_id(presence_->worker_id);
    call->request.set_presence(true);
    if (!counted) ++presence_->open;
    presence_->calls.push_back(std::move(owned));
  }
  // Started outside the lock (its callback takes it). No deadline: the call lasts as long as
  // the worker. An EndPresence before the start cancels it at the start (TryCancel), and the
  // open count keeps this client alive until its callback ran.
  transport_->stubs[server]->async()->Barrier(
      &call->context, &call->request, &call->reply, [this, server](grpc::Status status) {
        OnPresenceEnded(server, status.error_code() == grpc::StatusCode::UNAVAILABLE);
      });
}

void PsClient::OnPresenceEnded(size_t server, bool server_went_away) {
  {
    absl::MutexLock lock(&presence_->mu);
    // Otherwise the outcome does not matter: a server that went away fails the worker's other
    // calls.
    const bool reopen = !presence_->ending && options_.server_restarts && server_went_away;
    if (!reopen) {
      --presence_->open;
      return;
    }
  }
  StartPresence(server, /*counted=*/true, /*wait_for_server=*/true);
}

absl::Status PsClient::Leave(uint32_t worker_id) {
  absl::Status status = CallAll<BarrierCall>(
      "goodbye", options_.rpc_timeout, FLEET_PS_STARTER(Barrier),
      [&](BarrierCall* call) {
        call->request.set_worker_id(worker_id);
        call->request.set_goodbye(true);
      },
      [](size_t, const proto::BarrierReply&) { return absl::OkStatus(); });
  EndPresence();
  return status;
}

void PsClient::EndPresence() {
  if (!presence_) return;
  absl::MutexLock lock(&presence_->mu);
  presence_->ending = true;
  for (auto& call : presence_->calls) call->context.TryCancel();
  presence_->mu.Await(absl::Condition(
      +[](int* open) { return *open == 0; }, &presence_->open));
  presence_->calls.clear();
}

absl::Status PsClient::StopServers() {
  if (state_.load() == kStopped) return absl::OkStatus();
  if (auto s = CheckUsable("StopServers"); !s.ok()) return s;
  auto status = CallAll<StopCall>(
      "Stop", options_.rpc_timeout, FLEET_PS_STARTER(Stop), [](StopCall*) {},
      [](size_t, const proto::StopReply&) { return absl::OkStatus(); });
  if (status.ok()) {
    State open = kOpen;
    state_.compare_exchange_strong(open, kStopped);
  }
  return status;
}

}  // namespace fleet::ps
