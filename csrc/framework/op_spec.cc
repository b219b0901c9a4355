#include "framework/op_spec.h"

#include "absl/strings/str_join.h"

namespace fleet::framework {
namespace {

const std::vector<std::string>& SlotOrEmpty(const VarNameMap& map, const std::string& slot) {
  static const std::vector<std::string> kEmpty;
  auto it = map.find(slot);
  return it == map.end() ? kEmpty : it->second;
}

std::string DescribeSlots(const VarNameMap& map) {
  std::vector<std::string> parts;
  for (const auto& [slot, args] : map) {
    parts.push_back(absl::StrCat(slot, "=[", absl::StrJoin(args, ", "), "]"));
  }
  return absl::StrJoin(parts, ", ");
}

Attribute AttributeFromProto(const proto::OpDesc::Attr& a) {
  switch (a.type()) {
    case proto::INT:
      return a.i();
    case proto::FLOAT:
      return a.f();
    case proto::STRING:
      return a.s();
    case proto::INTS:
      return std::vector<int32_t>(a.ints().begin(), a.ints().end());
    case proto::FLOATS:
      return std::vector<float>(a.floats().begin(), a.floats().end());
    case proto::STRINGS:
      return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case proto::BOOLEAN:
      return a.b();
    case proto::BOOLEANS:
      return std::vector<bool>(a.bools().begin(), a.bools().end());
    case proto::LONG:
      return a.l();
    case proto::LONGS:
      return std::vector<int64_t>(a.longs().begin(), a.longs().end());
    case proto::BLOCK:
      return a.block_idx();
    default:
      throw InvalidArgument(
          absl::StrCat("attribute '", a.name(), "' has unknown type ", static_cast<int>(a.type())));
  }
}

void AttributeToProto(const Attribute& attr, proto::OpDesc::Attr* a) {
  std::visit(
      [a](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, int32_t>) {
          a->set_type(proto::INT);
          a->set_i(v);
        } else if constexpr (std::is_same_v<V, float>) {
          a->set_type(proto::FLOAT);
          a->set_f(v);
        } else if constexpr (std::is_same_v<V, std::string>) {
          a->set_type(proto::STRING);
          a->set_s(v);
        } else if constexpr (std::is_same_v<V, std::vector<int32_t>>) {
          a->set_type(proto::INTS);
          for (auto x : v) a->add_ints(x);
        } else if constexpr (std::is_same_v<V, std::vector<float>>) {
          a->set_type(proto::FLOATS);
          for (auto x : v) a->add_floats(x);
        } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          a->set_type(proto::STRINGS);
          for (const auto& x : v) a->add_strings(x);
        } else if constexpr (std::is_same_v<V, bool>) {
          a->set_type(proto::BOOLEAN);
          a->set_b(v);
        } else if constexpr (std::is_same_v<V, std::vector<bool>>) {
          a->set_type(proto::BOOLEANS);
          for (bool x : v) a->add_bools(x);
        } else if constexpr (std::is_same_v<V, int64_t>) {
          a->set_type(proto::LONG);
          a->set_l(v);
        } else {
          a->set_type(proto::LONGS);
          for (auto x : v) a->add_longs(x);
        }
      },
      attr);
}

}  // namespace

const std::vector<std::string>& OpSpec::Inputs(const std::string& slot) const {
  return SlotOrEmpty(inputs, slot);
}

const std::vector<std::string>& OpSpec::Outputs(const std::string& slot) const {
  return SlotOrEmpty(outputs, slot);
}

std::string OpSpec::Describe() const {
  std::string text =
      absl::StrCat(type, "(", DescribeSlots(inputs), ") -> (", DescribeSlots(outputs), ")");
  if (attrs.Has(kOpCallsiteAttr)) {
    absl::StrAppend(&text, " created at ", attrs.Get<std::string>(kOpCallsiteAttr, type));
  }
  return text;
}

OpSpec OpSpecFromProto(const proto::OpDesc& desc) {
  OpSpec spec;
  spec.type = desc.type();
  for (const auto& v : desc.inputs()) {
    spec.inputs[v.parameter()].assign(v.arguments().begin(), v.arguments().end());
  }
  for (const auto& v : desc.outputs()) {
    spec.outputs[v.parameter()].assign(v.arguments().begin(), v.arguments().end());
  }
  for (const auto& a : desc.attrs()) spec.attrs.Set(a.name(), AttributeFromProto(a));
  return spec;
}

proto::OpDesc OpSpecToProto(const OpSpec& spec) {
  proto::OpDesc desc;
  desc.set_type(spec.type);
  for (const auto& [slot, args] : spec.inputs) {
    auto* v = desc.add_inputs();
    v->set_parameter(slot);
    for (const auto& a : args) v->add_arguments(a);
  }
  for (const auto& [slot, args] : spec.outputs) {
    auto* v = desc.add_outputs();
    v->set_parameter(slot);
    for (const auto& a : args) v->add_arguments(a);
  }
  // Sorted names keep the serialised form deterministic.
  std::map<std::string, const Attribute*> sorted;
  for (const auto& [name, value] : spec.attrs.items()) sorted[name] = &value;
  for (const auto& [name, value] : sorted) {
    auto* a = desc.add_attrs();
    a->set_name(name);
    AttributeToProto(*value, a);
  }
  return desc;
}

}  // namespace fleet::framework
