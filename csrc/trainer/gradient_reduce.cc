#include "trainer/gradient_reduce.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/errors.h"
#include "operators/blas.h"

namespace fleet::trainer {
namespace {

// Below this many elements a dense gradient is reduced by its owner alone: cutting it would
// cost more in cache-line sharing than the parallel sum saves.
constexpr int64_t kMinElementsPerRange = 16 * 1024;
// Owners whose largest share of the dense elements is at most this times the mean reduce their
// own gradients whole instead of cut into ranges.
constexpr double kOwnerBalance = 1.1;

const char* KindOf(const Variable* v) { return v->KindName(); }

// A product gradient's rows and columns: those of X^T dOut, checked alike in every source.
Shape ProductShape(const GradientSlot& g, const std::vector<int>& sources) {
  int64_t rows = -1, columns = -1;
  for (int r : sources) {
    const Variable* x = g.product_x[static_cast<size_t>(r)];
    const Variable* dout = g.product_dout[static_cast<size_t>(r)];
    FLEET_ENFORCE(x->IsType<LoDTensor>() && dout->IsType<LoDTensor>() &&
                      x->Get<LoDTensor>().initialized() && dout->Get<LoDTensor>().initialized(),
                  InvalidArgument, "weight gradient '", g.name, "' of replica ", r,
                  ": its mul's input and output gradient must be LoDTensors after the backward "
                  "pass, got ",
                  x->KindName(), " and ", dout->KindName());
    const LoDTensor& xt = x->Get<LoDTensor>();
    const LoDTensor& dt = dout->Get<LoDTensor>();
    FLEET_ENFORCE(xt.dtype() == DType::kFloat32 && dt.dtype() == DType::kFloat32 && dt.rank() >= 1,
                  InvalidArgument, "weight gradient '", g.name, "' of replica ", r,
                  ": its mul's input is ", DTypeName(xt.dtype()), " and output gradient ",
                  DTypeName(dt.dtype()), " of shape ", ShapeToString(dt.shape()),
                  "; only float32 products are computed across replicas");
    const int64_t n = dt.dim(dt.rank() - 1);
    const int64_t batch = n == 0 ? 0 : dt.numel() / n;
    const int64_t k = batch == 0 ? rows : xt.numel() / batch;
    FLEET_ENFORCE(n > 0 && (batch == 0 || xt.numel() == batch * k) &&
                      (columns < 0 || (columns == n && rows == k)),
                  InvalidArgument, "weight gradient '", g.name, "' of replica ", r,
                  ": input of shape ", ShapeToString(xt.shape()), " and output gradient of shape ",
                  ShapeToString(dt.shape()), " do not make a [", rows, ", ", columns,
                  "] product as in the replica before");
    rows = k;
    columns = n;
  }
  FLEET_ENFORCE(rows >= 0, InvalidArgument, "weight gradient '", g.name,
                "': every replica's share of the batch is empty");
  return {rows, columns};
}

// Checks that every source holds the same kind and shape, sizes the targets like the first
// source (a product's as X^T dOut) and returns whether the gradient is sparse.
bool PrepareTargets(const GradientSlot& g, const std::vector<int>& sources,
                    const std::vector<int>& targets) {
  if (g.product()) {
    const Shape shape = ProductShape(g, sources);
    for (int r : targets) {
      auto* t = g.replica[r]->GetMutable<LoDTensor>();
      t->Resize(shape);
      t->mutable_data(DType::kFloat32);
    }
    return false;
  }
  const Variable* first = g.replica[sources.front()];
  bool sparse = first->IsType<SelectedRows>();
  FLEET_ENFORCE(sparse || first->IsType<LoDTensor>(), InvalidArgument, "gradient '", g.name,
                "' of replica ", sources.front(), " holds ", KindOf(first),
                " after the backward pass; expected a LoDTensor or SelectedRows");
  for (int r : sources) {
    const Variable* v = g.replica[r];
    FLEET_ENFORCE(v->IsType<SelectedRows>() == sparse && v->IsInitialized(), InvalidArgument,
                  "gradient '", g.name, "' is ", KindOf(first), " in replica ", sources.front(),
                  " but ", KindOf(v), " in replica ", r);
  }
  if (sparse) return true;
  const LoDTensor& shape_of = first->Get<LoDTensor>();
  for (int r : sources) {
    const LoDTensor& t = g.replica[r]->Get<LoDTensor>();
    FLEET_ENFORCE(t.shape() == shape_of.shape() && t.dtype() == shape_of.dtype(), InvalidArgument,
                  "gradient '", g.name, "' has shape ", ShapeToString(shape_of.shape()),
                  " in replica ", sources.front(), " but ", ShapeToString(t.shape()),
                  " in replica ", r);
  }
  FLEET_ENFORCE(shape_of.dtype() == DType::kFloat32 || shape_of.dtype() == DType::kFloat64,
                InvalidArgument, "gradient '", g.name, "' is ", DTypeName(shape_of.dtype()),
                "; only float32 and float64 gradients can be reduced across replicas");
  for (int r : targets) {
    auto* t = g.replica[r]->GetMutable<LoDTensor>();
    t->Resize(shape_of.shape());
    t->mutable_data(shape_of.dtype());
  }
  return false;
}

// Elements a block of SumRange sums before writing them out: the block stays in L1 while every
// source is read once and every target written once (the sum cannot go straight into a target,
// which is also a source: the compiler would not vectorise a loop whose output may alias it).
constexpr int64_t kSumBlock = 2048;

// Sums elements [begin, end) of every source into the targets: every replica's gradient
// (AllReduce, or a gradient read everywhere), else the owner's, or, for a gradient split by
// rows, the variable of the replica whose share the range is (`worker`).
template <typename T>
void SumRange(const ReducePlan& plan, const GradientSlot& g, int64_t begin, int64_t end,
              int worker) {
  std::vector<const T*> sources;
  for (int r : plan.sources) sources.push_back(g.replica[r]->Get<LoDTensor>().data<T>());
  std::vector<T*> targets;
  if (plan.all_reduce || g.everywhere) {
    for (Variable* v : g.replica) targets.push_back(v->GetMutable<LoDTensor>()->data<T>());
  } else {
    const int target = g.row_part.empty() ? g.owner : worker;
    targets.push_back(g.replica[target]->GetMutable<LoDTensor>()->data<T>());
  }
  const T scale = static_cast<T>(plan.scale);
  const size_t last = sources.size() - 1;
  alignas(64) T sum[kSumBlock];
  for (int64_t at = begin; at < end; at += kSumBlock) {
    const int64_t n = std::min(kSumBlock, end - at);
    const T* first = sources[0] + at;
    if (last == 0) {
      for (int64_t i = 0; i < n; ++i) sum[i] = first[i] * scale;
    } else {
      // The first two sources in one pass, the last one scaled as it is added.
      const T* second = sources[1] + at;
      if (last == 1) {
        for (int64_t i = 0; i < n; ++i) sum[i] = (first[i] + second[i]) * scale;
      } else {
        for (int64_t i = 0; i < n; ++i) sum[i] = first[i] + second[i];
        for (size_t s = 2; s < last; ++s) {
          const T* src = sources[s] + at;
          for (int64_t i = 0; i < n; ++i) sum[i] += src[i];
        }
        const T* src = sources[last] + at;
        for (int64_t i = 0; i < n; ++i) sum[i] = (sum[i] + src[i]) * scale;
      }
    }
    for (T* target : targets) std::memcpy(target + at, sum, static_cast<size_t>(n) * sizeof(T));
  }
}

// The replicas' sparse values of one gradient, checked to agree: the height, the row width and
// how many rows they hold in all. The shape of a row comes from the first replica with rows (a
// replica's share may have none).
struct SparseSources {
  const SelectedRows* first = nullptr;
  int64_t width = 1;
  int64_t rows = 0;
};

SparseSources CheckSparseSources(const ReducePlan& plan, const GradientSlot& g) {
  int ref = plan.sources.front();
  for (int r : plan.sources) {
    if (!g.replica[r]->Get<SelectedRows>().rows().empty()) {
      ref = r;
      break;
    }
  }
  SparseSources out;
  out.first = &g.replica[ref]->Get<SelectedRows>();
  const SelectedRows& first = *out.first;
  out.width = first.value().rank() >= 2 ? first.value().dim(1) : 1;
  for (int r : plan.sources) {
    const SelectedRows& s = g.replica[r]->Get<SelectedRows>();
    FLEET_ENFORCE(s.height() == first.height() &&
                      (s.rows().empty() ||
                       s.value().numel() == static_cast<int64_t>(s.rows().size()) * out.width),
                  InvalidArgument, "sparse gradient '", g.name, "' of replica ", r, " has height ",
                  s.height(), " and ", s.value().numel(), " values for ", s.rows().size(),
                  " rows; replica ", ref, " has height ", first.height(), " and rows of width ",
                  out.width);
    out.rows += static_cast<int64_t>(s.rows().size());
  }
  return out;
}

// Sizes `value` for `rows` rows shaped like the sources' and returns its memory.
float* SizeRows(const SparseSources& in, int64_t rows, Tensor* value) {
  Shape shape = in.first->value().shape();
  if (shape.empty()) shape = {0, in.width};
  shape[0] = rows;
  value->Resize(shape);
  return value->mutable_data<float>();
}

void ReduceSparse(const ReducePlan& plan, const GradientSlot& g) {
  const SparseSources in = CheckSparseSources(plan, g);
  SelectedRows merged;
  merged.set_height(in.first->height());
  float* out = SizeRows(in, in.rows, merged.mutable_value());
  auto* out_rows = merged.mutable_rows();
  out_rows->reserve(static_cast<size_t>(in.rows));
  for (int r : plan.sources) {
    const SelectedRows& s = g.replica[r]->Get<SelectedRows>();
    if (s.rows().empty()) continue;
    out_rows->insert(out_rows->end(), s.rows().begin(), s.rows().end());
    const float* values = s.value().data<float>();
    for (int64_t i = 0, n = s.value().numel(); i < n; ++i) *out++ = values[i] * plan.scale;
  }
  // Each target gets memory of its own: the next backward pass of a replica writes its gradient
  // in place, which must not change another replica's.
  if (plan.all_reduce || g.everywhere) {
    for (size_t r = 0; r < g.replica.size(); ++r) {
      if (static_cast<int>(r) == g.owner) continue;
      auto* target = g.replica[r]->GetMutable<SelectedRows>();
      *target->mutable_rows() = merged.rows();
      target->set_height(merged.height());
      target->mutable_value()->CopyFrom(merged.value());
    }
  }
  *g.replica[g.owner]->GetMutable<SelectedRows>() = std::move(merged);
}

// Worker's share of a gradient split by rows: the rows of every source whose RowShare is
// `worker`, in the order ReduceSparse concatenates them, scaled the same way, into its
// row_part. The sources are only read, so every replica may take its share at once; the
// buffers of the part are reused from step to step.
void ReduceSparseRows(const ReducePlan& plan, const GradientSlot& g, int worker) {
  const SparseSources in = CheckSparseSources(plan, g);
  const int parts = static_cast<int>(g.row_part.size());
  int64_t mine = 0;
  for (int r : plan.sources) {
    for (int64_t row : g.replica[r]->Get<SelectedRows>().rows()) {
      mine += RowShare(row, parts) == worker;
    }
  }
  auto* part = g.row_part[static_cast<size_t>(worker)]->GetMutable<SelectedRows>();
  part->set_height(in.first->height());
  float* out = SizeRows(in, mine, part->mutable_value());
  auto* out_rows = part->mutable_rows();
  out_rows->clear();
  out_rows->reserve(static_cast<size_t>(mine));
  const int64_t width = in.width;
  for (int r : plan.sources) {
    const SelectedRows& s = g.replica[r]->Get<SelectedRows>();
    if (s.rows().empty()) continue;
    const float* values = s.value().data<float>();
    for (size_t i = 0; i < s.rows().size(); ++i) {
      if (RowShare(s.rows()[i], parts) != worker) continue;
      out_rows->push_back(s.rows()[i]);
      const float* row = values + static_cast<int64_t>(i) * width;
      for (int64_t j = 0; j < width; ++j) *out++ = row[j] * plan.scale;
    }
  }
}

// Rows [first, second) of a dense gradient split by rows, as element offsets.
std::pair<int64_t, int64_t> DenseElementShare(const LoDTensor& t, int worker, int replicas) {
  const int64_t rows = t.rank() == 0 ? 1 : t.dim(0);
  const int64_t width = rows == 0 ? 0 : t.numel() / rows;
  const auto [first, last] = DenseRowShare(rows, worker, replicas);
  return {first * width, last * width};
}

// Points worker's share of a dense gradient split by rows at the rows it has summed into its
// own variable (SumRange): the rows of its block, their values a view of that variable's
// memory, so the update reads them in place. The rows are rebuilt only when the block changes.
void SetDenseRowPart(const GradientSlot& g, int worker) {
  const LoDTensor& reduced = g.replica[static_cast<size_t>(worker)]->Get<LoDTensor>();
  const int parts = static_cast<int>(g.row_part.size());
  const int64_t rows = reduced.rank() == 0 ? 1 : reduced.dim(0);
  const auto [first, last] = DenseRowShare(rows, worker, parts);
  auto* part = g.row_part[static_cast<size_t>(worker)]->GetMutable<SelectedRows>();
  part->set_height(rows);
  auto* out_rows = part->mutable_rows();
  if (out_rows->size() != static_cast<size_t>(last - first) ||
      (!out_rows->empty() && out_rows->front() != first)) {
    out_rows->resize(static_cast<size_t>(last - first));
    for (int64_t i = first; i < last; ++i) (*out_rows)[static_cast<size_t>(i - first)] = i;
  }
  if (reduced.rank() == 0) {
    *part->mutable_value() = reduced;
    part->mutable_value()->Resize({1, 1});
  } else {
    *part->mutable_value() = reduced.Slice(first, last);
  }
}

// Worker's block of rows of a product gradient, computed from every source's X and dOut:
// rows [first, last) of scale * sum_s X_s^T dOut_s into its own variable, one GEMM a source
// accumulating into the block (the first one overwrites it), then copied into every other
// replica's variable under AllReduce. Only the sources are read and only this block written, so
// every replica may compute its block at once.
void ComputeProductRows(const ReducePlan& plan, const GradientSlot& g, int worker) {
  LoDTensor* own = g.replica[static_cast<size_t>(worker)]->GetMutable<LoDTensor>();
  const int64_t rows = own->dim(0);
  const int64_t columns = own->dim(1);
  const auto [first, last] = DenseRowShare(rows, worker, static_cast<int>(g.row_part.size()));
  float* block = own->data<float>() + first * columns;
  float beta = 0.f;
  for (int r : plan.sources) {
    const LoDTensor& dout = g.product_dout[static_cast<size_t>(r)]->Get<LoDTensor>();
    const int64_t batch = dout.numel() / columns;
    if (batch == 0) continue;
    const float* x = g.product_x[static_cast<size_t>(r)]->Get<LoDTensor>().data<float>();
    operators::blas::Gemm(true, false, last - first, columns, batch, plan.scale, x + first, rows,
                          dout.data<float>(), columns, beta, block, columns);
    beta = 1.f;
  }
  const size_t bytes = static_cast<size_t>((last - first) * columns) * sizeof(float);
  if (beta == 0.f) std::memset(block, 0, bytes);  // no source had a row of the batch
  if (!plan.all_reduce && !g.everywhere) return;
  for (size_t r = 0; r < g.replica.size(); ++r) {
    if (static_cast<int>(r) == worker) continue;
    std::memcpy(g.replica[r]->GetMutable<LoDTensor>()->data<float>() + first * columns, block,
                bytes);
  }
}

// Runs one dense task: its range summed (a product's block of rows computed), and, for a
// gradient split by rows, the worker's share pointed at it.
void ReduceDense(const ReducePlan& plan, const ReduceTask& task) {
  const GradientSlot& g = *task.gradient;
  if (g.product()) {
    ComputeProductRows(plan, g, task.worker);
  } else if (g.replica[plan.sources.front()]->Get<LoDTensor>().dtype() == DType::kFloat32) {
    SumRange<float>(plan, g, task.begin, task.end, task.worker);
  } else {
    SumRange<double>(plan, g, task.begin, task.end, task.worker);
  }
  if (!g.row_part.empty()) SetDenseRowPart(g, task.worker);
}

}  // namespace

ReducePlan PlanReduction(const std::vector<GradientSlot>& gradients, std::vector<int> sources,
                         int replicas, float scale, bool all_reduce) {
  ReducePlan plan;
  plan.sources = std::move(sources);
  plan.scale = scale;
  plan.all_reduce = all_reduce;
  if (plan.sources.empty()) return plan;
  std::vector<int> targets;
  if (all_reduce) {
    for (int r = 0; r < replicas; ++r) targets.push_back(r);
  }
  const int64_t workers = static_cast<int64_t>(replicas);
  // Dense gradients with their element counts; whether they are cut is decided once all are
  // known (see below).
  std::vector<std::pair<const GradientSlot*, int64_t>> dense;
  std::vector<int64_t> owner_elements(static_cast<size_t>(replicas), 0);
  for (const auto& g : gradients) {
    bool all_empty = true;
    for (int r : plan.sources) all_empty = all_empty && !g.produced(r)->IsInitialized();
    if (all_empty) continue;  // no replica's backward pass produced it this step
    const bool split = !g.row_part.empty();
    if (!all_reduce) {
      targets.clear();
      for (int r = 0; r < replicas; ++r) {
        if (g.everywhere || split || r == g.owner) targets.push_back(r);
      }
    }
    bool sparse = PrepareTargets(g, plan.sources, targets);
    if (split && sparse) {
      for (int r = 0; r < replicas; ++r) plan.tasks.push_back(ReduceTask{&g, true, 0, 0, r});
      continue;
    }
    if (split) {  // each replica sums its block of rows: its share of the dense work
      const LoDTensor& shape_of = g.replica[plan.sources.front()]->Get<LoDTensor>();
      for (int r = 0; r < replicas; ++r) {
        const auto [begin, end] = DenseElementShare(shape_of, r, replicas);
        plan.tasks.push_back(ReduceTask{&g, false, begin, end, r});
        owner_elements[static_cast<size_t>(r)] += end - begin;
      }
      continue;
    }
    if (sparse) {
      plan.tasks.push_back(ReduceTask{&g, true, 0, 0, g.owner});
      continue;
    }
    const int64_t n = g.replica[plan.sources.front()]->Get<LoDTensor>().numel();
    dense.emplace_back(&g, n);
    owner_elements[static_cast<size_t>(g.owner)] += n;
  }
  // When every replica owns about as many elements as the others, each reduces its own
  // gradients whole: the work is as balanced as cut ranges, and a replica's update then reads
  // only what it reduced itself (owner_local: no barrier needed between the two; under
  // AllReduce it also writes the other replicas' copies, which no op of theirs reads).
  int64_t total = 0, most = 0;
  for (int64_t e : owner_elements) {
    total += e;
    most = std::max(most, e);
  }
  bool everywhere = false;
  for (const auto& g : gradients) everywhere = everywhere || g.everywhere;
  plan.owner_local = !everywhere && static_cast<double>(most) * static_cast<double>(workers) <=
                                        kOwnerBalance * static_cast<double>(total);
  for (const auto& [g, n] : dense) {
    if (plan.owner_local || n < kMinElementsPerRange * 2 || workers == 1) {
      plan.tasks.push_back(ReduceTask{g, false, 0, n, g->owner});
      continue;
    }
    const int64_t ranges = std::min(workers, n / kMinElementsPerRange);
    for (int64_t i = 0; i < ranges; ++i) {
      int64_t begin = n * i / ranges, end = n * (i + 1) / ranges;
      plan.tasks.push_back(ReduceTask{g, false, begin, end, static_cast<int>(i)});
    }
  }
  return plan;
}

void ReduceGradient(const GradientSlot& gradient, const std::vector<int>& sources, int replicas,
                    float scale, bool all_reduce, int worker) {
  ReducePlan plan;
  plan.sources = sources;
  plan.scale = scale;
  plan.all_reduce = all_reduce;
  bool all_empty = true;
  for (int r : sources) all_empty = all_empty && !gradient.produced(r)->IsInitialized();
  if (sources.empty() || all_empty) return;
  const bool split = !gradient.row_part.empty();
  std::vector<int> targets;
  for (int r = 0; r < replicas; ++r) {
    if (all_reduce || gradient.everywhere || split || r == gradient.owner) targets.push_back(r);
  }
  const bool sparse = PrepareTargets(gradient, plan.sources, targets);
  if (worker < 0) worker = gradient.owner;
  FLEET_ENFORCE(split ? worker < replicas : worker == gradient.owner, InvalidArgument, "gradient '",
                gradient.name, "' cannot be reduced by replica ", worker,
                split ? "" : ": it is reduced whole by its owner");
  int64_t begin = 0, end = 0;
  if (!sparse) {
    const LoDTensor& shape_of = gradient.replica[sources.front()]->Get<LoDTensor>();
    std::tie(begin, end) = split ? DenseElementShare(shape_of, worker, replicas)
                                 : std::make_pair(int64_t{0}, shape_of.numel());
  }
  plan.tasks.push_back(ReduceTask{&gradient, sparse, begin, end, worker});
  RunReduceTasks(plan, worker);
}

void RunReduceTasks(const ReducePlan& plan, int worker) {
  for (const auto& task : plan.tasks) {
    if (task.worker != worker) continue;
    const GradientSlot& g = *task.gradient;
    if (task.sparse && !g.row_part.empty()) {
      ReduceSparseRows(plan, g, worker);
    } else if (task.sparse) {
      ReduceSparse(plan, g);
    } else {
      ReduceDense(plan, task);
    }
  }
}

}  // namespace fleet::trainer
