// CPU kernels of the cuDNN RNN family: validate -> describe (RnnSpec) -> call the engine.
//
// Built twice: into the main library under "TfRnn>" names, and (with
// -DTFRNN_CUDNN_OP_PREFIX=\"\") into _tf_rnn_ops_cudnn_cpu.so under the stock names, which have
// no CPU kernel in stock TensorFlow (loaded only by tf_rnn_ops.register_cudnn_rnn_cpu_kernels).
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

#ifndef TFRNN_CUDNN_OP_PREFIX
#define TFRNN_CUDNN_OP_PREFIX "TfRnn>"
#endif

namespace tfrnn {
namespace {

using ::tensorflow::DEVICE_CPU;
using ::tensorflow::OpInputList;
using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpOutputList;

// Attrs shared by the family.
struct CudnnAttrs {
  RnnMode mode = RnnMode::kLstm;
  std::string mode_name, input_mode;
  int D = 1;
  float dropout = 0.f;
  int64_t seed = 0, seed2 = 0, num_proj = 0;
  bool is_training = true, time_major = true;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(c->GetAttr("rnn_mode", &mode_name));
    mode = mode_name == "lstm"       ? RnnMode::kLstm
           : mode_name == "gru"      ? RnnMode::kGru
           : mode_name == "rnn_tanh" ? RnnMode::kTanh
                                     : RnnMode::kRelu;
    TF_RETURN_IF_ERROR(c->GetAttr("input_mode", &input_mode));
    std::string direction;
    TF_RETURN_IF_ERROR(c->GetAttr("direction", &direction));
    D = direction == "bidirectional" ? 2 : 1;
    TF_RETURN_IF_ERROR(c->GetAttr("dropout", &dropout));
    TF_RETURN_IF_ERROR(c->GetAttr("seed", &seed));
    TF_RETURN_IF_ERROR(c->GetAttr("seed2", &seed2));
    if (c->HasAttr("num_proj")) TF_RETURN_IF_ERROR(c->GetAttr("num_proj", &num_proj));
    if (c->HasAttr("is_training")) TF_RETURN_IF_ERROR(c->GetAttr("is_training", &is_training));
    if (c->HasAttr("time_major")) TF_RETURN_IF_ERROR(c->GetAttr("time_major", &time_major));
    const std::string op = c->def().op();
    if (!(dropout >= 0.f && dropout <= 1.f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": attr dropout must be in [0, 1], got ", dropout));
    }
    if (num_proj < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": attr num_proj must be >= 0, got ", num_proj));
    }
    if (num_proj > 0 && mode != RnnMode::kLstm) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": attr num_proj (", num_proj, ") is only supported with rnn_mode lstm, got ",
          mode_name));
    }
    return absl::OkStatus();
  }

  bool Skip(int64_t input_size, int64_t num_units) const {
    return input_mode == "skip_input" ||
           (input_mode == "auto_select" && input_size == num_units);
  }

  // `from_tensors`: the sizes were read from input/input_h/input_c (not from scalars).
  std::string Describe(const RnnSpec& s, bool from_tensors = false) const {
    return absl::StrCat("rnn_mode ", mode_name, ", num_layers ", s.L, ", ",
                        D == 2 ? "bidirectional" : "unidirectional", ", input_size ", s.I,
                        ", num_units ", s.N,
                        from_tensors ? (s.mode == RnnMode::kLstm ? " (from input_c)" : " (from input_h)") : "",
                        s.P > 0 ? absl::StrCat(", num_proj ", s.P) : "",
                        s.skip_input ? ", skip_input" : "");
  }
};

// Sizes given as int32 scalars (ParamsSize, ParamsToCanonical, CanonicalToParams).
absl::Status ScalarSpec(OpKernelContext* ctx, const CudnnAttrs& at, RnnSpec* s) {
  const std::string op = ctx->op_kernel().type_string();
  const char* names[3] = {"num_layers", "num_units", "input_size"};
  int64_t v[3];
  for (int k = 0; k < 3; ++k) {
    const Tensor& t = ctx->input(k);
    if (t.dims() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": ", names[k],
                                                     " must be a scalar, got shape ", ShapeStr(t)));
    }
    v[k] = t.scalar<int32_t>()();
    if (v[k] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", names[k], " must be positive, got ", v[k]));
    }
  }
  s->mode = at.mode;
  s->L = v[0];
  s->N = v[1];
  s->I = v[2];
  s->D = at.D;
  s->P = at.num_proj;
  if (s->P > s->N) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": num_proj (", s->P,
                                                   ") must not exceed num_units (", s->N, ")"));
  }
  if (at.input_mode == "skip_input" && s->I != s->N) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_mode skip_input needs input_size == num_units, got input_size ", s->I,
        " and num_units ", s->N));
  }
  s->skip_input = at.Skip(s->I, s->N);
  return CheckRnnSizes(op, *s, at.Describe(*s));
}

// Inputs of the forward and backward ops, validated (ranks, then sizes, then values).
struct FwdInputs {
  const Tensor *input, *input_h, *input_c, *params, *lengths = nullptr;
  RnnSpec spec;
  TensorShape out_shape, c_shape;
};

absl::Status ValidateForward(OpKernelContext* ctx, const CudnnAttrs& at, bool v3,
                             FwdInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInput(ctx, "input", &in->input));
  TF_RETURN_IF_ERROR(GetInput(ctx, "input_h", &in->input_h));
  TF_RETURN_IF_ERROR(GetInput(ctx, "input_c", &in->input_c));
  TF_RETURN_IF_ERROR(GetInput(ctx, "params", &in->params));
  if (v3) TF_RETURN_IF_ERROR(GetInput(ctx, "sequence_lengths", &in->lengths));
  const bool tm = at.time_major, lstm = at.mode == RnnMode::kLstm;
  const char* x_layout = tm ? "[max_time, batch_size, input_size]"
                            : "[batch_size, max_time, input_size]";
  const char* h_layout = tm ? "[num_layers * dir, batch_size, num_units]"
                            : "[batch_size, num_layers * dir, num_units]";
  TF_RETURN_IF_ERROR(CheckRank(op, "input", *in->input, 3, x_layout));
  TF_RETURN_IF_ERROR(CheckRank(op, "input_h", *in->input_h, 3, h_layout));
  if (lstm) TF_RETURN_IF_ERROR(CheckRank(op, "input_c", *in->input_c, 3, h_layout));
  TF_RETURN_IF_ERROR(CheckRank(op, "params", *in->params, 1, "[params_size]"));
  if (v3) TF_RETURN_IF_ERROR(CheckRank(op, "sequence_lengths", *in->lengths, 1, "[batch_size]"));

  RnnSpec& s = in->spec;
  s.mode = at.mode;
  s.D = at.D;
  s.T = in->input->dim_size(tm ? 0 : 1);
  s.B = in->input->dim_size(tm ? 1 : 0);
  s.I = in->input->dim_size(2);
  const int64_t LD = in->input_h->dim_size(tm ? 0 : 1);
  const int64_t hB = in->input_h->dim_size(tm ? 1 : 0);
  const int64_t Hs = in->input_h->dim_size(2);
  if (LD == 0 || LD % at.D != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_h must have shape ", h_layout, " with num_layers * dir a positive multiple of ",
        at.D, ", got ", ShapeStr(*in->input_h)));
  }
  if (hB != s.B) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input_h has batch size ", hB,
                                                   " but input has ", s.B, " (input_h shape ",
                                                   ShapeStr(*in->input_h), ", input shape ",
                                                   ShapeStr(*in->input), ")"));
  }
  if (Hs == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": input_h must have num_units > 0, got shape ", ShapeStr(*in->input_h)));
  }
  s.L = LD / at.D;
  s.P = at.num_proj;
  if (lstm) {
    const Tensor& c = *in->input_c;
    if (s.P > 0) {
      if (Hs != s.P) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": with num_proj ", s.P,
                                                       " input_h must have last dimension ", s.P,
                                                       ", got shape ", ShapeStr(*in->input_h)));
      }
      if (c.dim_size(0) != in->input_h->dim_size(0) || c.dim_size(1) != in->input_h->dim_size(1) ||
          c.dim_size(2) < s.P) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": input_c must have shape ", h_layout, " with num_units >= num_proj (", s.P,
            ") and the first two dimensions of input_h ", ShapeStr(*in->input_h), ", got ",
            ShapeStr(c)));
      }
      s.N = c.dim_size(2);
    } else {
      if (c.shape() != in->input_h->shape()) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": input_c must have the shape of input_h ",
                                                       ShapeStr(*in->input_h), ", got ",
                                                       ShapeStr(c)));
      }
      s.N = Hs;
    }
    in->c_shape = c.shape();
  } else {
    s.N = Hs;
    in->c_shape = TensorShape({});
  }
  const bool skip_requested = at.input_mode == "skip_input";
  if (skip_requested && s.I != s.N) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_mode skip_input needs input_size == num_units, got input_size ", s.I,
        " (input shape ", ShapeStr(*in->input), ") and num_units ", s.N));
  }
  s.skip_input = at.Skip(s.I, s.N);
  s.training = at.is_training;
  s.dropout = at.dropout;
  s.seed = (static_cast<unsigned long long>(at.seed) << 32) ^
           static_cast<unsigned long long>(static_cast<uint32_t>(at.seed2));
  TF_RETURN_IF_ERROR(CheckRnnSizes(
      op, s,
      absl::StrCat("input ", ShapeStr(*in->input), ", input_h ", ShapeStr(*in->input_h),
                   lstm ? absl::StrCat(", input_c ", ShapeStr(*in->input_c)) : "", ": ",
                   at.Describe(s), ", max_time ", s.T, ", batch ", s.B)));
  const int64_t expect = RnnParamsCount(s).value();
  if (in->params->NumElements() != expect) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": params has ", in->params->NumElements(), " elements, expected ", expect, " for ",
        at.Describe(s, true)));
  }
  if (v3) {
    if (in->lengths->dim_size(0) != s.B) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": sequence_lengths must have shape [",
                                                     s.B, "] (batch_size), got ",
                                                     ShapeStr(*in->lengths)));
    }
    auto len = in->lengths->flat<int32_t>();
    for (int64_t b = 0; b < s.B; ++b) {
      if (len(b) < 0 || len(b) > s.T) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": sequence_lengths[", b, "] = ",
                                                       len(b), " is outside [0, max_time = ",
                                                       s.T, "]"));
      }
    }
  }
  const int64_t out_depth = s.D * RnnHs(s);
  in->out_shape = tm ? TensorShape({s.T, s.B, out_depth}) : TensorShape({s.B, s.T, out_depth});
  return absl::OkStatus();
}

// The backprop ops' inputs after the forward's, with their shapes checked against what the
// forward's inputs give (reserve_space is checked by the caller, whose size it knows).
struct BwdInputs {
  const Tensor *output, *output_h, *output_c, *dy, *dhn, *dcn, *reserve;
};

absl::Status ValidateBackward(OpKernelContext* ctx, const FwdInputs& in, BwdInputs* b) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInput(ctx, "output", &b->output));
  TF_RETURN_IF_ERROR(GetInput(ctx, "output_h", &b->output_h));
  TF_RETURN_IF_ERROR(GetInput(ctx, "output_c", &b->output_c));
  TF_RETURN_IF_ERROR(GetInput(ctx, "output_backprop", &b->dy));
  TF_RETURN_IF_ERROR(GetInput(ctx, "output_h_backprop", &b->dhn));
  TF_RETURN_IF_ERROR(GetInput(ctx, "output_c_backprop", &b->dcn));
  TF_RETURN_IF_ERROR(GetInput(ctx, "reserve_space", &b->reserve));
  // Each pair of inputs must have the shape that the forward's inputs give.
  auto same_shape = [&](const char* n1, const Tensor* t1, const char* n2, const Tensor* t2,
                        const TensorShape& want, const std::string& what) {
    for (auto [name, t] : {std::make_pair(n1, t1), std::make_pair(n2, t2)}) {
      if (t->shape() != want) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": ", name, " must have ", what, ", got ", ShapeStr(*t)));
      }
    }
    return absl::OkStatus();
  };
  TF_RETURN_IF_ERROR(same_shape("output", b->output, "output_backprop", b->dy, in.out_shape,
                                absl::StrCat("shape ", in.out_shape.DebugString())));
  TF_RETURN_IF_ERROR(same_shape("output_h", b->output_h, "output_h_backprop", b->dhn,
                                in.input_h->shape(),
                                absl::StrCat("the shape of input_h ", ShapeStr(*in.input_h))));
  if (in.spec.mode != RnnMode::kLstm) return absl::OkStatus();
  return same_shape("output_c", b->output_c, "output_c_backprop", b->dcn, in.c_shape,
                    absl::StrCat("the shape of input_c ", in.c_shape.DebugString()));
}

// What the forward and backward kernels share: the family's attrs and the op version (1-3:
// CudnnRNN(Backprop)[V2|V3]).
class CudnnRnnOpBase : public OpKernel {
 public:
  CudnnRnnOpBase(OpKernelConstruction* c, int version) : OpKernel(c), version_(version) {
    OP_REQUIRES_OK(c, at_.Read(c));
  }

 protected:
  // V3's sequence lengths as the engine's ints (copied into *store), or nullptr.
  static const int* Lengths(const FwdInputs& in, std::vector<int>* store) {
    if (in.lengths == nullptr) return nullptr;
    auto len = in.lengths->flat<int32_t>();
    store->assign(len.data(), len.data() + in.spec.B);
    return store->data();
  }

  CudnnAttrs at_;
  int version_;
};

// An op kernel class of a fixed version, for REGISTER_KERNEL_BUILDER.
template <template <typename> class Op, typename T, int V>
class Versioned : public Op<T> {
 public:
  explicit Versioned(OpKernelConstruction* c) : Op<T>(c, V) {}
};

template <typename T>
class CudnnRnnForwardOp : public CudnnRnnOpBase {
 public:
  using A = typename ComputeType<T>::type;
  using CudnnRnnOpBase::CudnnRnnOpBase;

  void Compute(OpKernelContext* ctx) override {
    FwdInputs in;
    OP_REQUIRES_OK(ctx, ValidateForward(ctx, at_, version_ >= 3, &in));
    const RnnSpec& s = in.spec;
    Tensor *output, *output_h, *output_c, *reserve;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, in.out_shape, &output));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, in.input_h->shape(), &output_h));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, in.c_shape, &output_c));
    const int64_t reserve_a = RnnReserveSize(s);
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            3,
                            s.training ? TensorShape({ReserveElementsOfT<T, A>(reserve_a)})
                                       : TensorShape({}),
                            &reserve));
    if (version_ >= 2) {
      Tensor* host_reserved;
      const bool pair = version_ == 2 && s.training;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(4, pair ? TensorShape({2}) : TensorShape({}),
                                               &host_reserved));
      host_reserved->flat<int8_t>().setZero();
    }
    const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
    RnnFwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = Lengths(in, &lengths);
    // The engine leaves the reserve rows past each sequence's length unwritten: zero the
    // reserve first (on the pool) when some sequence is shorter than T, so that the output
    // never holds uninitialised memory. Only then: V3 always has lengths, and zeroing the whole
    // reserve on every call is a noticeable part of a training step (CHANGELOG.md).
    const bool short_seq =
        std::any_of(lengths.begin(), lengths.end(), [&](int n) { return n < s.T; });
    if (!s.training || short_seq) Zero<T>(dev, reserve->flat<T>().data(), reserve->NumElements());
    const bool lstm = s.mode == RnnMode::kLstm;
    if (!lstm) output_c->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    const A* x = br.In(*in.input);
    a.h0 = br.In(*in.input_h);
    a.c0 = lstm ? br.In(*in.input_c) : nullptr;
    a.params = br.In(*in.params);
    A* y = br.Out(output);
    a.hn = br.Out(output_h);
    a.cn = lstm ? br.Out(output_c) : nullptr;
    const int64_t ycols = s.D * RnnHs(s);
    if (at_.time_major) {
      a.x = x;
      a.y = y;
    } else {
      A* xt = br.Scratch(s.T * s.B * s.I);
      a.y = br.Scratch(s.T * s.B * ycols);
      if (xt != nullptr) SwapMajor<A>(dev, x, xt, s.B, s.T, s.I);
      a.x = xt;
    }
    a.reserve = s.training ? reinterpret_cast<A*>(reserve->flat<T>().data())
                           : br.Scratch(reserve_a);
    A* ws = br.Scratch(RnnFwdWorkspaceSize(SpecFor<T>(s)));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::RnnFwd(*engine)(pool, SpecFor<T>(s), a, ws);
    if (!at_.time_major) SwapMajor<A>(dev, a.y, y, s.T, s.B, ycols);
    br.Finish();
  }
};

template <typename T>
class CudnnRnnBackwardOp : public CudnnRnnOpBase {
 public:
  using A = typename ComputeType<T>::type;
  CudnnRnnBackwardOp(OpKernelConstruction* c, int version) : CudnnRnnOpBase(c, version) {
    at_.is_training = true;
  }

  void Compute(OpKernelContext* ctx) override {
    const std::string op = type_string();
    FwdInputs in;
    OP_REQUIRES_OK(ctx, ValidateForward(ctx, at_, version_ >= 3, &in));
    const RnnSpec& s = in.spec;
    const bool lstm = s.mode == RnnMode::kLstm;
    BwdInputs b;
    OP_REQUIRES_OK(ctx, ValidateBackward(ctx, in, &b));
    const Tensor *dy = b.dy, *dhn = b.dhn, *dcn = b.dcn, *reserve = b.reserve;
    const int64_t reserve_a = RnnReserveSize(s);
    const int64_t reserve_t = ReserveElementsOfT<T, A>(reserve_a);
    OP_REQUIRES(ctx, reserve->dims() == 1 && reserve->NumElements() == reserve_t,
                absl::InvalidArgumentError(absl::StrCat(
                    op, ": reserve_space must have shape [", reserve_t, "], got ",
                    ShapeStr(*reserve),
                    ": pass the reserve_space output of the matching forward op run with "
                    "is_training=True and the same attrs, sequence lengths and shapes")));

    Tensor *dx, *dh0, *dc0, *dparams;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, in.input->shape(), &dx));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, in.input_h->shape(), &dh0));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, in.input_c->shape(), &dc0));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, in.params->shape(), &dparams));
    if (!lstm) dc0->flat<T>().setZero();

    ComputeBridge<T> br(ctx);
    const CpuDevice& dev = ctx->eigen_device<CpuDevice>();
    RnnBwdArgs<A> a;
    std::vector<int> lengths;
    a.lengths = Lengths(in, &lengths);
    const int64_t ycols = s.D * RnnHs(s);
    const A* x = br.In(*in.input);
    const A* dyv = br.In(*dy);
    a.h0 = br.In(*in.input_h);
    a.c0 = lstm ? br.In(*in.input_c) : nullptr;
    a.params = br.In(*in.params);
    a.reserve = reinterpret_cast<const A*>(reserve->flat<T>().data());
    a.dhn = br.In(*dhn);
    a.dcn = lstm ? br.In(*dcn) : nullptr;
    A* dxv = br.Out(dx);
    a.dh0 = br.Out(dh0);
    a.dc0 = lstm ? br.Out(dc0) : nullptr;
    a.dparams = br.Out(dparams);
    if (at_.time_major) {
      a.x = x;
      a.dy = dyv;
      a.dx = dxv;
    } else {
      A* xt = br.Scratch(s.T * s.B * s.I);
      A* dyt = br.Scratch(s.T * s.B * ycols);
      a.dx = br.Scratch(s.T * s.B * s.I);
      if (xt != nullptr && dyt != nullptr) {
        SwapMajor<A>(dev, x, xt, s.B, s.T, s.I);
        SwapMajor<A>(dev, dyv, dyt, s.B, s.T, ycols);
      }
      a.x = xt;
      a.dy = dyt;
    }
    A* ws = br.Scratch(RnnBwdWorkspaceSize(s));
    OP_REQUIRES_OK(ctx, br.status());
    const EngineApi* engine;
    OP_REQUIRES_OK(ctx, GetEngine(&engine));
    TfHostPool pool(ctx);
    EngineFns<A>::RnnBwd(*engine)(pool, SpecFor<T>(s), a, ws);
    if (!at_.time_major) SwapMajor<A>(dev, a.dx, dxv, s.T, s.B, s.I);
    br.Finish();
  }
};

template <typename S>
class CudnnRnnParamsSizeOp : public OpKernel {
 public:
  explicit CudnnRnnParamsSizeOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, at_.Read(c));
  }
  void Compute(OpKernelContext* ctx) override {
    RnnSpec s;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, at_, &s));
    const int64_t size = RnnParamsCount(s).value();
    OP_REQUIRES(ctx, size <= static_cast<int64_t>(std::numeric_limits<S>::max()),
                absl::InvalidArgumentError(absl::StrCat(type_string(), ": params size ", size,
                                                        " does not fit in S; use S=int64")));
    Tensor* out;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({1}), &out));
    out->flat<S>()(0) = static_cast<S>(size);
  }

 private:
  CudnnAttrs at_;
};

// Canonical regions of a spec, in the order of docs/SEMANTICS.md §4.2.
struct Region {
  int64_t offset, rows, cols;
};
void CanonicalRegions(const RnnSpec& s, std::vector<Region>* weights,
                      std::vector<Region>* biases) {
  const int64_t K = RnnK(s), N = s.N, Hs = RnnHs(s);
  for (int64_t p = 0; p < s.L * s.D; ++p) {
    const RnnParamOffsets o = RnnParamLayout(s, p);
    const int64_t in = RnnInWidth(s, p / s.D);
    for (int64_t k = 0; k < K; ++k) weights->push_back({o.w + k * N * in, N, in});
    for (int64_t k = 0; k < K; ++k) weights->push_back({o.r + k * N * Hs, N, Hs});
    if (s.P > 0) weights->push_back({o.p, s.P, N});
    for (int64_t k = 0; k < K; ++k) biases->push_back({o.bw + k * N, N, 1});
    for (int64_t k = 0; k < K; ++k) biases->push_back({o.br + k * N, N, 1});
  }
}

// Lengths of the canonical lists (what CanonicalRegions lists), without listing them.
int64_t NumCanonicalWeights(const RnnSpec& s) {
  return s.L * s.D * (2 * RnnK(s) + (s.P > 0 ? 1 : 0));
}
int64_t NumCanonicalBiases(const RnnSpec& s) { return s.L * s.D * 2 * RnnK(s); }

absl::Status CheckListLengths(const std::string& op, const CudnnAttrs& at, const RnnSpec& s,
                              bool v2, int64_t num_weights, int64_t num_biases, int64_t want_w,
                              int64_t want_b) {
  if (num_weights == want_w && num_biases == want_b) return absl::OkStatus();
  if (v2) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": num_params_weights = ", num_weights, " and num_params_biases = ", num_biases,
        ", but ", at.Describe(s), " has ", want_w, " weights and ", want_b, " biases"));
  }
  return absl::InvalidArgumentError(absl::StrCat(op, ": num_params = ", num_weights, ", but ",
                                                 at.Describe(s), " has ", want_w,
                                                 " weight matrices and ", want_b, " biases"));
}

template <typename T>
class ParamsToCanonicalOp : public OpKernel {
 public:
  explicit ParamsToCanonicalOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, at_.Read(c));
    v2_ = c->HasAttr("num_params_weights");
    if (v2_) {
      OP_REQUIRES_OK(c, c->GetAttr("num_params_weights", &num_weights_));
      OP_REQUIRES_OK(c, c->GetAttr("num_params_biases", &num_biases_));
    } else {
      OP_REQUIRES_OK(c, c->GetAttr("num_params", &num_weights_));
      num_biases_ = num_weights_;
    }
  }
  void Compute(OpKernelContext* ctx) override {
    const std::string op = type_string();
    RnnSpec s;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, at_, &s));
    const Tensor& params = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckRank(op, "params", params, 1, "[params_size]"));
    const int64_t expect = RnnParamsCount(s).value();
    OP_REQUIRES(ctx, params.NumElements() == expect,
                absl::InvalidArgumentError(absl::StrCat(op, ": params has ", params.NumElements(),
                                                        " elements, expected ", expect, " for ",
                                                        at_.Describe(s))));
    OP_REQUIRES_OK(ctx, CheckListLengths(op, at_, s, v2_, num_weights_, num_biases_,
                                         NumCanonicalWeights(s), NumCanonicalBiases(s)));
    std::vector<Region> w, b;
    CanonicalRegions(s, &w, &b);
    OpOutputList weights, biases;
    OP_REQUIRES_OK(ctx, ctx->output_list("weights", &weights));
    OP_REQUIRES_OK(ctx, ctx->output_list("biases", &biases));
    const T* src = params.flat<T>().data();
    for (size_t k = 0; k < w.size(); ++k) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, weights.allocate(k, TensorShape({w[k].rows, w[k].cols}), &out));
      std::copy_n(src + w[k].offset, w[k].rows * w[k].cols, out->flat<T>().data());
    }
    for (size_t k = 0; k < b.size(); ++k) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, biases.allocate(k, TensorShape({b[k].rows}), &out));
      std::copy_n(src + b[k].offset, b[k].rows, out->flat<T>().data());
    }
  }

 private:
  CudnnAttrs at_;
  bool v2_ = false;
  int num_weights_ = 0, num_biases_ = 0;
};

template <typename T>
class CanonicalToParamsOp : public OpKernel {
 public:
  explicit CanonicalToParamsOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, at_.Read(c));
    v2_ = c->HasAttr("num_params_weights");
  }
  void Compute(OpKernelContext* ctx) override {
    const std::string op = type_string();
    RnnSpec s;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, at_, &s));
    OpInputList weights, biases;
    OP_REQUIRES_OK(ctx, ctx->input_list("weights", &weights));
    OP_REQUIRES_OK(ctx, ctx->input_list("biases", &biases));
    // The list lengths are checked before the regions are listed: num_layers comes from a
    // scalar and may be huge.
    OP_REQUIRES_OK(ctx, CheckListLengths(op, at_, s, v2_, weights.size(), biases.size(),
                                         NumCanonicalWeights(s), NumCanonicalBiases(s)));
    std::vector<Region> w, b;
    CanonicalRegions(s, &w, &b);
    for (size_t k = 0; k < w.size(); ++k) {
      OP_REQUIRES(ctx, weights[k].NumElements() == w[k].rows * w[k].cols,
                  absl::InvalidArgumentError(absl::StrCat(
                      op, ": weights[", k, "] has shape ", ShapeStr(weights[k]), ", expected [",
                      w[k].rows, ", ", w[k].cols, "] (", w[k].rows * w[k].cols,
                      " elements) for ", at_.Describe(s))));
    }
    for (size_t k = 0; k < b.size(); ++k) {
      OP_REQUIRES(ctx, biases[k].NumElements() == b[k].rows,
                  absl::InvalidArgumentError(absl::StrCat(op, ": biases[", k, "] has shape ",
                                                          ShapeStr(biases[k]), ", expected [",
                                                          b[k].rows, "] for ",
                                                          at_.Describe(s))));
    }
    Tensor* params;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({RnnParamsCount(s).value()}), &params));
    T* dst = params->flat<T>().data();
    for (size_t k = 0; k < w.size(); ++k) {
      std::copy_n(weights[k].flat<T>().data(), w[k].rows * w[k].cols, dst + w[k].offset);
    }
    for (size_t k = 0; k < b.size(); ++k) {
      std::copy_n(biases[k].flat<T>().data(), b[k].rows, dst + b[k].offset);
    }
  }

 private:
  CudnnAttrs at_;
  bool v2_ = false;
};

#define TFRNN_NAME(n) TFRNN_CUDNN_OP_PREFIX n
#define TFRNN_REGISTER_CUDNN(T)                                                               \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNN")).Device(DEVICE_CPU).TypeConstraint<T>("T"),                 \
      Versioned<CudnnRnnForwardOp, T, 1>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNV2")).Device(DEVICE_CPU).TypeConstraint<T>("T"),               \
      Versioned<CudnnRnnForwardOp, T, 2>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNV3")).Device(DEVICE_CPU).TypeConstraint<T>("T"),               \
      Versioned<CudnnRnnForwardOp, T, 3>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNBackprop")).Device(DEVICE_CPU).TypeConstraint<T>("T"),         \
      Versioned<CudnnRnnBackwardOp, T, 1>);                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNBackpropV2")).Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      Versioned<CudnnRnnBackwardOp, T, 2>);                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNBackpropV3")).Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      Versioned<CudnnRnnBackwardOp, T, 3>);                                                        \
  REGISTER_KERNEL_BUILDER(                                                                    \
      Name(TFRNN_NAME("CudnnRNNParamsToCanonical")).Device(DEVICE_CPU).TypeConstraint<T>("T"), \
      ParamsToCanonicalOp<T>);                                                                \
  REGISTER_KERNEL_BUILDER(Name(TFRNN_NAME("CudnnRNNParamsToCanonicalV2"))                     \
                              .Device(DEVICE_CPU)                                             \
                              .TypeConstraint<T>("T"),                                        \
                          ParamsToCanonicalOp<T>);                                            \
  REGISTER_KERNEL_BUILDER(Name(TFRNN_NAME("CudnnRNNCanonicalToParams"))                       \
                              .Device(DEVICE_CPU)                                             \
                              .TypeConstraint<T>("T"),                                        \
                          CanonicalToParamsOp<T>);                                            \
  REGISTER_KERNEL_BUILDER(Name(TFRNN_NAME("CudnnRNNCanonicalToParamsV2"))                     \
                              .Device(DEVICE_CPU)                                             \
                              .TypeConstraint<T>("T"),                                        \
                          CanonicalToParamsOp<T>);                                            \
  REGISTER_KERNEL_BUILDER(Name(TFRNN_NAME("CudnnRNNParamsSize"))                              \
                              .Device(DEVICE_CPU)                                             \
                              .TypeConstraint<T>("T")                                         \
                              .TypeConstraint<int32_t>("S"),                                  \
                          CudnnRnnParamsSizeOp<int32_t>);                                     \
  REGISTER_KERNEL_BUILDER(Name(TFRNN_NAME("CudnnRNNParamsSize"))                              \
                              .Device(DEVICE_CPU)                                             \
                              .TypeConstraint<T>("T")                                         \
                              .TypeConstraint<int64_t>("S"),                                  \
                          CudnnRnnParamsSizeOp<int64_t>);

TFRNN_REGISTER_CUDNN(Eigen::half)
TFRNN_REGISTER_CUDNN(Eigen::bfloat16)
TFRNN_REGISTER_CUDNN(float)
TFRNN_REGISTER_CUDNN(double)
#undef TFRNN_REGISTER_CUDNN


#ifdef TFRNN_WITH_CUDA
#include "cc/kernels/cudnn_rnn_gpu_kernels.inc"  // GPU kernels (TfRnn> names only)
#endif

}  // namespace
}  // namespace tfrnn
