#include "ps/table/dense_table.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ps/table/detail/magnitude.h"
#include "ps/table/detail/memory.h"
#include "ps/table/detail/overflow_guard.h"
#include "ps/table/detail/rule_kernels.h"
#include "ps/table/sparse_table.h"

namespace fleet::ps {
namespace {

// Whether adding deltas whose largest MagnitudeBits is `g_max` to a block's `length` values
// leaves them and the state after them (which a delta leaves alone, its largest MagnitudeBits
// `state_max`) within `bound`: |w + g| <= 2h with both at most h, and the 1% covers the
// rounding of the sum. `value_max`, the values' largest MagnitudeBits (UINT32_MAX when unknown),
// answers for them without a scan.
bool DeltaStaysWithin(const float* values, size_t length, uint32_t value_max, uint32_t state_max,
                      uint32_t g_max, float bound) {
  const uint32_t h = detail::MagnitudeBits(static_cast<float>(bound / 2.02));
  if (g_max > h || state_max > h) return false;
  if (value_max != UINT32_MAX) return value_max <= h;
  return !detail::ScanMagnitudeAbove(values, length, h);
}

// Push's blocks one after the other, on the calling thread.
void ForEachInOrder(size_t n, const std::function<void(size_t)>& task) {
  for (size_t i = 0; i < n; ++i) task(i);
}

}  // namespace

uint64_t DenseTable::EstimateBytes(const proto::TableConfig& config, uint32_t num_servers) {
  auto rule = MakeUpdateRule(config.optimizer());
  if (!rule.ok() || num_servers == 0) return UINT64_MAX;
  DenseLayout layout;
  layout.dim = config.dim();
  layout.block_size =
      config.dense_block_size() == 0 ? kDefaultDenseBlockSize : config.dense_block_size();
  const uint64_t blocks = layout.num_blocks();
  const uint64_t local_blocks = (blocks + num_servers - 1) / num_servers;
  const uint64_t block_floats = layout.block_size + (*rule)->StateDim(layout.block_size);
  // Per local block: its floats and the Block with its heap overhead; per block: local_of_.
  const long double bytes =
      static_cast<long double>(local_blocks) * (block_floats * sizeof(float) + sizeof(Block) + 64) +
      static_cast<long double>(blocks) * sizeof(int64_t);
  return bytes >= 1.8e19L ? UINT64_MAX : static_cast<uint64_t>(bytes);
}

absl::StatusOr<std::unique_ptr<DenseTable>> DenseTable::Create(
    const proto::TableConfig& config, uint32_t server_index, uint32_t num_servers,
    const BlockShardFn& block_to_server) {
  const std::string name =
      absl::StrCat("dense table ", config.table_id(), " '", config.name(), "'");
  if (config.type() != proto::DENSE) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": config type is not DENSE"));
  }
  if (config.dim() == 0) return absl::InvalidArgumentError(absl::StrCat(name, ": dim is 0"));
  if (num_servers == 0 || server_index >= num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": server ", server_index, " of ", num_servers, " does not exist"));
  }
  auto rule = MakeUpdateRule(config.optimizer());
  if (!rule.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", rule.status().message()));
  auto init = Initializer::Create(config.initializer());
  if (!init.ok())
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", init.status().message()));
  if (auto s = detail::CheckOverflowConfig(config, name); !s.ok()) return s;
  std::vector<detail::RateRange> rate_ranges;
  for (const auto& r : config.rate_scales())
    rate_ranges.push_back({r.offset(), r.size(), r.scale()});
  if (auto s = detail::CheckRateRanges(&rate_ranges, config.dim(), name); !s.ok()) return s;
  if (auto s = detail::CheckMemory(EstimateBytes(config, num_servers),
                                   absl::StrCat(name, " (dim ", config.dim(), ")"));
      !s.ok()) {
    return s;
  }

  std::unique_ptr<DenseTable> table(new DenseTable(config, std::move(*rule)));
  const DenseLayout& layout = table->layout_;
  table->local_of_.assign(layout.num_blocks(), -1);
  for (uint64_t b = 0; b < layout.num_blocks(); ++b) {
    if (block_to_server(b, num_servers) != server_index) continue;
    auto block = std::make_unique<Block>();
    block->index = b;
    block->offset = table->local_size_;
    block->length = layout.BlockLength(b);
    block->data.resize(block->length + table->rule_->StateDim(block->length));
    init->Fill(0, layout.BlockBegin(b), block->length, block->data.data());
    table->rule_->InitState(block->length, block->data.data() + block->length);
    block->rate_spans = detail::SpansOfBlock(rate_ranges, layout.BlockBegin(b), block->length);
    block->rate_above_1 = detail::AnySpanAbove1(block->rate_spans);
    table->local_size_ += block->length;
    table->local_of_[b] = static_cast<int64_t>(table->blocks_.size());
    table->blocks_.push_back(std::move(block));
  }
  return table;
}

DenseTable::DenseTable(const proto::TableConfig& config, std::unique_ptr<UpdateRule> rule)
    : config_(config), rule_(std::move(rule)) {
  layout_.dim = config.dim();
  layout_.block_size =
      config.dense_block_size() == 0 ? kDefaultDenseBlockSize : config.dense_block_size();
}

std::string DenseTable::Name() const {
  return absl::StrCat("dense table ", config_.table_id(), " '", config_.name(), "'");
}

absl::Status DenseTable::Pull(absl::Span<float> out) const {
  if (out.size() != local_size_) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": this server holds ", local_size_,
                                                   " floats, the pull asked for ", out.size()));
  }
  for (const auto& block : blocks_) {
    std::lock_guard<std::mutex> lock(block->mu);
    std::memcpy(out.data() + block->offset, block->data.data(), block->length * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status DenseTable::Push(absl::Span<const float> grads, bool is_delta) {
  return PushBlocks(grads, is_delta, {}, ForEachInOrder);
}

absl::Status DenseTable::Push(absl::Span<const float> grads, const ForEach& for_each) {
  return PushBlocks(grads, false, {}, for_each);
}

absl::Status DenseTable::CheckOut(absl::Span<const float> out, const char* what) const {
  if (out.size() == local_size_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(Name(), ": this server holds ", local_size_,
                                                 " floats, the ", what, " asked for ", out.size(),
                                                 " back"));
}

absl::Status DenseTable::PushAndPull(absl::Span<const float> grads, absl::Span<float> out,
                                     bool is_delta) {
  if (absl::Status size = CheckOut(out, "push-pull"); !size.ok()) return size;
  const absl::Span<float> outs[] = {out};
  return PushBlocks(grads, is_delta, outs, ForEachInOrder);
}

absl::Status DenseTable::PushAndCopy(absl::Span<const float> grads, const ForEach& for_each,
                                     absl::Span<const absl::Span<float>> outs) {
  for (const absl::Span<float> out : outs) {
    if (absl::Status size = CheckOut(out, "push-and-copy"); !size.ok()) return size;
  }
  return PushBlocks(grads, false, outs, for_each);
}

bool DenseTable::UpdateBlock(Block& block, const float* g, uint32_t g_max, bool is_delta,
                             float* out) const {
  detail::OverflowGuard guard(config_.overflow());
  detail::SpanScaler scaler;
  std::lock_guard<std::mutex> lock(block.mu);
  float* w = block.data.data();
  // Copying a block with its optimizer state before each update, to put it back should the
  // update overflow, cost more CPU than the update itself; a block whose magnitudes prove the
  // update stays in range (the usual case) needs neither the copy nor the check after.
  // A GEO job pushes only deltas, which never change the state: its largest magnitude is kept
  // from one push to the next instead of scanning it each time (under Adam it is two thirds of
  // the block, and its scan was most of a dense delta push's CPU after the add itself). The
  // values' largest magnitude is measured by the add itself (AddDeltaMeasured) for the next
  // push, which then reads the values once, to add to them, instead of twice.
  if (is_delta && block.state_max == Block::kUnknownStateMax) {
    block.state_max = detail::ScanMaxMagnitude(w + block.length, block.data.size() - block.length);
  }
  bool in_range = false;
  if (is_delta) {
    in_range =
        DeltaStaysWithin(w, block.length, block.value_max, block.state_max, g_max, guard.bound());
  } else {
    in_range = !block.rate_above_1 && rule_->UpdateStaysWithin(block.length, w, w + block.length, g,
                                                               guard.bound(), {block.bound, g_max});
  }
  // The rule's update changes the state; the guard may put back or clip all of the block.
  if (!is_delta || !in_range) block.state_max = Block::kUnknownStateMax;
  block.value_max = Block::kUnknownValueMax;  // a delta's add below measures it again
  if (!in_range) guard.Keep(w, block.data.size());
  const bool scaled = !is_delta && !block.rate_spans.empty();
  // The values go out from the rule's own loop unless something changes them after it.
  float* out_now = out != nullptr && in_range && !scaled ? out : nullptr;
  if (is_delta) {
    const uint32_t value_max = detail::AddDeltaMeasured(block.length, w, g, out_now);
    // Out of range, the guard below may clip the values or put them back.
    if (in_range) block.value_max = value_max;
  } else {
    // The rule at its own rate, then each span keeps `scale` times the change it made.
    if (scaled) scaler.Keep(block.rate_spans, w);
    const uint32_t bound = rule_->UpdateMeasured(block.length, w, w + block.length, g, out_now);
    if (scaled) scaler.Apply(block.rate_spans, w);
    // Only the rule's loop measured the block: scaled, clipped or put back, it is unknown.
    block.bound = in_range && !scaled ? bound : UpdateRule::kUnknownBound;
  }
  if (is_delta) block.bound = UpdateRule::kUnknownBound;
  const bool kept = in_range || guard.Check(w, block.data.size());
  // The block's values as they are now (scaled, clipped or put back by the guard).
  if (out != nullptr && out_now == nullptr) {
    std::memcpy(out, w, block.length * sizeof(float));
  }
  return kept;
}

absl::Status DenseTable::PushBlocks(absl::Span<const float> grads, bool is_delta,
                                    absl::Span<const absl::Span<float>> outs,
                                    const ForEach& for_each) {
  const char* what = is_delta ? "deltas" : "gradients";
  if (grads.size() != local_size_) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": this server holds ", local_size_,
                                                   " floats, the push sent ", grads.size(), " ",
                                                   what));
  }
  // Checked block by block (the blocks cover the push), before any block changes. Each block's
  // largest magnitude serves its proof of range too, which so reads the gradient once.
  std::vector<uint32_t> g_max(blocks_.size());
  for_each(blocks_.size(), [&](size_t b) {
    g_max[b] = detail::ScanMaxMagnitude(grads.data() + blocks_[b]->offset, blocks_[b]->length);
  });
  if (std::any_of(g_max.begin(), g_max.end(),
                  [](uint32_t bits) { return bits >= detail::kInfinityBits; })) {  // NaN or inf
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": ", what, " contain NaN or infinity; push rejected"));
  }
  pristine_.store(false);
  if (!is_delta) rule_->BeginUpdate();  // one step of a learning-rate schedule per push
  std::vector<char> kept(blocks_.size());
  for_each(blocks_.size(), [&](size_t b) {
    Block& block = *blocks_[b];
    // The first out is written by the update's own loop; the others are copied from the block,
    // not from that out (a worker's shared memory, which its worker could write meanwhile).
    kept[b] = UpdateBlock(block, grads.data() + block.offset, g_max[b], is_delta,
                          outs.empty() ? nullptr : outs[0].data() + block.offset);
    if (outs.size() < 2) return;
    std::lock_guard<std::mutex> lock(block.mu);
    for (size_t k = 1; k < outs.size(); ++k) {
      std::memcpy(outs[k].data() + block.offset, block.data.data(), block.length * sizeof(float));
    }
  });
  uint64_t refused = 0;
  uint64_t first_block = 0;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    if (!kept[b] && refused++ == 0) first_block = blocks_[b]->index;
  }
  if (refused == 0) return absl::OkStatus();
  const float bound = detail::OverflowGuard(config_.overflow()).bound();
  return absl::OutOfRangeError(absl::StrCat(
      Name(), ": the update of block ", first_block, " (elements from ",
      layout_.BlockBegin(first_block), ")",
      refused > 1 ? absl::StrCat(" and ", refused - 1, " other blocks") : "",
      " would take a weight or optimizer state past ", bound, " (float overflow from finite ", what,
      "); those blocks were left as they were, the rest "
      "of the push was applied"));
}

absl::StatusOr<bool> DenseTable::Initialize(absl::Span<const float> values) {
  if (values.size() != local_size_) {
    return absl::InvalidArgumentError(absl::StrCat(Name(), ": this server holds ", local_size_,
                                                   " floats, the initial values have ",
                                                   values.size()));
  }
  if (!AllFinite(values)) {
    return absl::InvalidArgumentError(
        absl::StrCat(Name(), ": initial values contain NaN or infinity; rejected"));
  }
  if (!pristine_.exchange(false)) return false;
  for (auto& block : blocks_) {
    std::lock_guard<std::mutex> lock(block->mu);
    std::memcpy(block->data.data(), values.data() + block->offset, block->length * sizeof(float));
    block->bound = UpdateRule::kUnknownBound;
    block->value_max = Block::kUnknownValueMax;
  }
  return true;
}

absl::StatusOr<uint64_t> DenseTable::Save(const std::string& path) const {
  TableFileHeader header = NewTableFileHeader();
  header.table_id = id();
  header.table_type = proto::DENSE;
  header.save_mode = proto::BASE;
  header.rule = config_.optimizer().rule_case();
  header.block_size = static_cast<uint32_t>(layout_.block_size);
  header.dim = layout_.dim;
  auto writer = TableFileWriter::Open(path, header);
  if (!writer.ok()) return writer.status();
  for (const auto& block : blocks_) {
    std::lock_guard<std::mutex> lock(block->mu);
    const int64_t key = static_cast<int64_t>(block->index);
    if (auto s = (*writer)->Append(&key, sizeof(key)); !s.ok()) return s;
    if (auto s = (*writer)->Append(block->data.data(), block->data.size() * sizeof(float));
        !s.ok()) {
      return s;
    }
  }
  if (auto s = (*writer)->Finish(blocks_.size()); !s.ok()) return s;
  return blocks_.size();
}

absl::Status DenseTable::ReadPart(TableFileReader* part, std::vector<bool>* seen,
                                  uint64_t* loaded) {
  std::vector<float> skip;
  for (uint64_t r = 0; r < part->header().row_count; ++r) {
    int64_t key;
    if (auto s = part->Read(&key, sizeof(key)); !s.ok()) return s;
    if (key < 0 || static_cast<uint64_t>(key) >= layout_.num_blocks()) {
      return absl::DataLossError(absl::StrCat(part->path(), ": block ", key, " out of range"));
    }
    const size_t length = layout_.BlockLength(key);
    const size_t floats = length + rule_->StateDim(length);
    const int64_t local = local_of_[key];
    if (local < 0) {
      skip.resize(floats);
      if (auto s = part->Read(skip.data(), floats * sizeof(float)); !s.ok()) return s;
      continue;
    }
    Block& block = *blocks_[local];
    std::lock_guard<std::mutex> lock(block.mu);
    block.bound = UpdateRule::kUnknownBound;  // before the read, which may fail half way
    block.state_max = Block::kUnknownStateMax;
    block.value_max = Block::kUnknownValueMax;
    if (auto s = part->Read(block.data.data(), floats * sizeof(float)); !s.ok()) return s;
    (*seen)[local] = true;
    ++*loaded;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DenseTable::Load(absl::Span<TableFileReader* const> parts) {
  for (TableFileReader* part : parts) {
    const TableFileHeader& h = part->header();
    if (h.table_id != id() || h.table_type != proto::DENSE || h.dim != layout_.dim ||
        h.block_size != layout_.block_size ||
        h.rule != static_cast<uint32_t>(config_.optimizer().rule_case())) {
      return absl::InvalidArgumentError(absl::StrCat(
          part->path(), " holds table ", h.table_id, " (type ", h.table_type, ", dim ", h.dim,
          ", block ", h.block_size, ", rule ", h.rule, "); ", Name(), " expects dim ", layout_.dim,
          ", block ", layout_.block_size, ", rule ", config_.optimizer().rule_case()));
    }
  }
  // A dense part is small: one opened to be checked while reading is checked whole here, before
  // any block changes (no-op for a part already checked).
  for (TableFileReader* part : parts) {
    if (auto s = part->CheckNow(); !s.ok()) return s;
  }
  pristine_.store(false);  // loaded values are never replaced by a worker's start-up values
  std::vector<bool> seen(blocks_.size(), false);
  uint64_t loaded = 0;
  for (TableFileReader* part : parts) {
    if (auto s = ReadPart(part, &seen, &loaded); !s.ok()) return s;
  }
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (!seen[i]) {
      return absl::NotFoundError(
          absl::StrCat(Name(), ": block ", blocks_[i]->index, " is in none of the loaded parts"));
    }
  }
  return loaded;
}

proto::TableStats DenseTable::Stats() const {
  proto::TableStats stats;
  stats.set_table_id(id());
  stats.set_type(proto::DENSE);
  stats.set_rows(blocks_.size());
  uint64_t bytes = local_of_.capacity() * sizeof(int64_t);
  for (const auto& block : blocks_) bytes += sizeof(Block) + block->data.capacity() * sizeof(float);
  stats.set_bytes(bytes);
  return stats;
}

}  // namespace fleet::ps
