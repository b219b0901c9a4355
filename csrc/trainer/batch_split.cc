#include "trainer/batch_split.h"

#include <algorithm>

#include "core/errors.h"

namespace fleet::trainer {
namespace {

// Samples [begin, end) of `batch` with their lod levels rebased.
LoDTensor Share(const LoDTensor& batch, size_t begin, size_t end) {
  LoD lod;
  for (const auto& level : batch.lod()) {
    std::vector<size_t> offsets(level.begin() + static_cast<std::ptrdiff_t>(begin),
                                level.begin() + static_cast<std::ptrdiff_t>(end) + 1);
    for (auto& o : offsets) o -= level[begin];
    lod.push_back(std::move(offsets));
    // The next level (or the rows) is indexed by this level's offsets.
    size_t next_begin = level[begin], next_end = level[end];
    begin = next_begin;
    end = next_end;
  }
  LoDTensor share(batch.Slice(static_cast<int64_t>(begin), static_cast<int64_t>(end)));
  share.set_lod(std::move(lod));
  return share;
}

}  // namespace

std::vector<LoDTensor> SplitBatch(const LoDTensor& batch, int replicas, const std::string& name) {
  FLEET_ENFORCE(replicas > 0, InvalidArgument, "feed '", name, "': ", replicas, " replicas");
  FLEET_ENFORCE(batch.rank() >= 1, InvalidArgument, "feed '", name,
                "' is a scalar; a batch fed to a data-parallel program needs a batch dimension");
  batch.ValidateLoD(absl::StrCat("feed '", name, "'"));
  const size_t samples =
      batch.lod().empty() ? static_cast<size_t>(batch.dim(0)) : batch.lod()[0].size() - 1;
  const size_t n = static_cast<size_t>(replicas);
  const size_t step = samples == 0 ? 0 : (samples + n - 1) / n;
  const size_t shares = step == 0 ? 0 : (samples + step - 1) / step;
  const char* unit = batch.lod().empty() ? " samples" : " sequences";
  FLEET_ENFORCE(shares == n, InvalidArgument, "feed '", name, "': a batch of ", samples, unit,
                " cannot be split across ", replicas, " replicas (shares of ", step, unit,
                " make only ", shares, " shares); feed a batch that gives every replica a share",
                " or use fewer replicas (CPU_NUM or places=)");
  std::vector<LoDTensor> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(Share(batch, i * step, std::min(samples, (i + 1) * step)));
  }
  return out;
}

}  // namespace fleet::trainer
