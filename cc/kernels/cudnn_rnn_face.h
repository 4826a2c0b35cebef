// The cuDNN RNN family's op kernels on either device: the attrs, the validation of every op's
// inputs (ranks, then sizes, then values), the output allocation, the canonical regions of the
// params buffer, the kernel classes over the device's computations (cudnn_rnn_kernels.cc:
// CPU, cudnn_rnn_gpu_kernels.cc: CUDA), the ParamsSize kernel (host only on both devices) and
// the list of the family's kernels.
#ifndef TF_RNN_OPS_CC_KERNELS_CUDNN_RNN_FACE_H_
#define TF_RNN_OPS_CC_KERNELS_CUDNN_RNN_FACE_H_

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cc/kernels/kernel_util.h"
#include "cc/kernels/rnn_kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace tfrnn {
namespace cudnn {

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
    mode = ParseRnnMode(mode_name);
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
                        ", num_units ", s.H,
                        from_tensors ? (s.mode == RnnMode::kLstm ? " (from input_c)" : " (from input_h)") : "",
                        s.P > 0 ? absl::StrCat(", num_proj ", s.P) : "",
                        s.skip_input ? ", skip_input" : "");
  }
};

// The size inputs 0, 1, 2 of ParamsSize, ParamsToCanonical and CanonicalToParams: int32
// scalars, in the TensorFlow kernels tensors, in the XLA kernels compile-time constants.
constexpr const char* kSizeInputs[3] = {"num_layers", "num_units", "input_size"};
inline absl::Status CheckSizeScalar(const std::string& op, int k, const TensorShape& shape) {
  if (shape.dims() == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": ", kSizeInputs[k], " must be a scalar, got shape ", ShapeStr(shape)));
}

// The spec of the sizes v (the size inputs' values) under the attrs.
inline absl::Status SizesSpec(const std::string& op, const CudnnAttrs& at, const int64_t v[3],
                              RnnSpec* s) {
  for (int k = 0; k < 3; ++k) {
    if (v[k] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", kSizeInputs[k], " must be positive, got ", v[k]));
    }
  }
  s->mode = at.mode;
  s->L = v[0];
  s->H = v[1];
  s->I = v[2];
  s->D = at.D;
  s->P = at.num_proj;
  if (s->P > s->H) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": num_proj (", s->P,
                                                   ") must not exceed num_units (", s->H, ")"));
  }
  if (at.input_mode == "skip_input" && s->I != s->H) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_mode skip_input needs input_size == num_units, got input_size ", s->I,
        " and num_units ", s->H));
  }
  s->skip_input = at.Skip(s->I, s->H);
  return CheckRnnSizes(op, *s, at.Describe(*s));
}

inline absl::Status ScalarSpec(OpKernelContext* ctx, const CudnnAttrs& at, RnnSpec* s) {
  const std::string op = ctx->op_kernel().type_string();
  int64_t v[3];
  for (int k = 0; k < 3; ++k) {
    TF_RETURN_IF_ERROR(CheckSizeScalar(op, k, ctx->input(k).shape()));
    v[k] = ctx->input(k).scalar<int32_t>()();
  }
  return SizesSpec(op, at, v, s);
}

// The shapes of a forward op's inputs (lengths: V3's sequence_lengths, else unused).
struct FwdShapes {
  TensorShape input, input_h, input_c, params, lengths;
};

// What the forward's input shapes describe: the engine's spec, the output's shape and
// output_c's (input_c's for lstm, else a scalar).
struct FwdLayout {
  RnnSpec spec;
  TensorShape out_shape, c_shape;
};

// Checks every input shape of a forward or backprop op (ranks, then sizes) and describes the
// call; the messages name the op and the input. V3's sequence_lengths values are checked by
// the caller (CheckSeqLengths).
inline absl::Status ForwardLayoutOf(const std::string& op, const CudnnAttrs& at, bool v3,
                                    const FwdShapes& in, FwdLayout* out) {
  const bool tm = at.time_major, lstm = at.mode == RnnMode::kLstm;
  const char* x_layout = tm ? "[max_time, batch_size, input_size]"
                            : "[batch_size, max_time, input_size]";
  const char* h_layout = tm ? "[num_layers * dir, batch_size, num_units]"
                            : "[batch_size, num_layers * dir, num_units]";
  TF_RETURN_IF_ERROR(CheckRank(op, "input", in.input, 3, x_layout));
  TF_RETURN_IF_ERROR(CheckRank(op, "input_h", in.input_h, 3, h_layout));
  if (lstm) TF_RETURN_IF_ERROR(CheckRank(op, "input_c", in.input_c, 3, h_layout));
  TF_RETURN_IF_ERROR(CheckRank(op, "params", in.params, 1, "[params_size]"));
  if (v3) TF_RETURN_IF_ERROR(CheckRank(op, "sequence_lengths", in.lengths, 1, "[batch_size]"));

  RnnSpec& s = out->spec;
  s.mode = at.mode;
  s.D = at.D;
  s.T = in.input.dim_size(tm ? 0 : 1);
  s.B = in.input.dim_size(tm ? 1 : 0);
  s.I = in.input.dim_size(2);
  const int64_t LD = in.input_h.dim_size(tm ? 0 : 1);
  const int64_t hB = in.input_h.dim_size(tm ? 1 : 0);
  const int64_t Hs = in.input_h.dim_size(2);
  if (LD == 0 || LD % at.D != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_h must have shape ", h_layout, " with num_layers * dir a positive multiple of ",
        at.D, ", got ", ShapeStr(in.input_h)));
  }
  if (hB != s.B) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": input_h has batch size ", hB,
                                                   " but input has ", s.B, " (input_h shape ",
                                                   ShapeStr(in.input_h), ", input shape ",
                                                   ShapeStr(in.input), ")"));
  }
  if (Hs == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": input_h must have num_units > 0, got shape ", ShapeStr(in.input_h)));
  }
  s.L = LD / at.D;
  s.P = at.num_proj;
  if (lstm) {
    const TensorShape& c = in.input_c;
    if (s.P > 0) {
      if (Hs != s.P) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": with num_proj ", s.P,
                                                       " input_h must have last dimension ", s.P,
                                                       ", got shape ", ShapeStr(in.input_h)));
      }
      if (c.dim_size(0) != in.input_h.dim_size(0) || c.dim_size(1) != in.input_h.dim_size(1) ||
          c.dim_size(2) < s.P) {
        return absl::InvalidArgumentError(absl::StrCat(
            op, ": input_c must have shape ", h_layout, " with num_units >= num_proj (", s.P,
            ") and the first two dimensions of input_h ", ShapeStr(in.input_h), ", got ",
            ShapeStr(c)));
      }
      s.H = c.dim_size(2);
    } else {
      if (c != in.input_h) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": input_c must have the shape of input_h ",
                                                       ShapeStr(in.input_h), ", got ",
                                                       ShapeStr(c)));
      }
      s.H = Hs;
    }
    out->c_shape = c;
  } else {
    s.H = Hs;
    out->c_shape = TensorShape({});
  }
  const bool skip_requested = at.input_mode == "skip_input";
  if (skip_requested && s.I != s.H) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": input_mode skip_input needs input_size == num_units, got input_size ", s.I,
        " (input shape ", ShapeStr(in.input), ") and num_units ", s.H));
  }
  s.skip_input = at.Skip(s.I, s.H);
  s.training = at.is_training;
  s.dropout = at.dropout;
  s.seed = (static_cast<unsigned long long>(at.seed) << 32) ^
           static_cast<unsigned long long>(static_cast<uint32_t>(at.seed2));
  TF_RETURN_IF_ERROR(CheckRnnSizes(
      op, s,
      absl::StrCat("input ", ShapeStr(in.input), ", input_h ", ShapeStr(in.input_h),
                   lstm ? absl::StrCat(", input_c ", ShapeStr(in.input_c)) : "", ": ",
                   at.Describe(s), ", max_time ", s.T, ", batch ", s.B)));
  const int64_t expect = RnnParamsCount(s).value();
  if (in.params.num_elements() != expect) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": params has ", in.params.num_elements(), " elements, expected ", expect, " for ",
        at.Describe(s, true)));
  }
  if (v3 && in.lengths.dim_size(0) != s.B) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": sequence_lengths must have shape [",
                                                   s.B, "] (batch_size), got ",
                                                   ShapeStr(in.lengths)));
  }
  const int64_t out_depth = s.D * RnnHs(s);
  out->out_shape = tm ? TensorShape({s.T, s.B, out_depth}) : TensorShape({s.B, s.T, out_depth});
  return absl::OkStatus();
}

// Inputs of the forward and backward ops, validated (ranks, then sizes, then values).
struct FwdInputs {
  const Tensor *input, *input_h, *input_c, *params, *lengths = nullptr;
  RnnSpec spec;
  TensorShape out_shape, c_shape;
};

inline absl::Status ValidateForward(OpKernelContext* ctx, const CudnnAttrs& at, bool v3,
                                    FwdInputs* in) {
  const std::string op = ctx->op_kernel().type_string();
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"input", &in->input},
                                     {"input_h", &in->input_h},
                                     {"input_c", &in->input_c},
                                     {"params", &in->params}}));
  if (v3) TF_RETURN_IF_ERROR(GetInput(ctx, "sequence_lengths", &in->lengths));
  FwdLayout layout;
  TF_RETURN_IF_ERROR(ForwardLayoutOf(
      op, at, v3,
      {in->input->shape(), in->input_h->shape(), in->input_c->shape(), in->params->shape(),
       v3 ? in->lengths->shape() : TensorShape()},
      &layout));
  in->spec = layout.spec;
  in->out_shape = layout.out_shape;
  in->c_shape = layout.c_shape;
  if (v3) TF_RETURN_IF_ERROR(CheckSeqLengths(op, *in->lengths, in->spec.B, in->spec.T, "max_time"));
  return absl::OkStatus();
}

// The backprop ops' inputs after the forward's (output, output_h, output_c, output_backprop,
// output_h_backprop, output_c_backprop): each pair must have the shape the forward's inputs
// give (reserve_space is checked by the caller, whose size it knows).
inline absl::Status CheckBackwardShapes(const std::string& op, const FwdLayout& f,
                                        const TensorShape& input_h,
                                        std::initializer_list<TensorShape> shapes) {
  const TensorShape* s = shapes.begin();
  auto same_shape = [&](const char* n1, const TensorShape& t1, const char* n2,
                        const TensorShape& t2, const TensorShape& want,
                        const std::string& what) {
    for (auto [name, t] : {std::make_pair(n1, &t1), std::make_pair(n2, &t2)}) {
      if (*t != want) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": ", name, " must have ", what, ", got ", ShapeStr(*t)));
      }
    }
    return absl::OkStatus();
  };
  TF_RETURN_IF_ERROR(same_shape("output", s[0], "output_backprop", s[3], f.out_shape,
                                absl::StrCat("shape ", f.out_shape.DebugString())));
  TF_RETURN_IF_ERROR(same_shape("output_h", s[1], "output_h_backprop", s[4], input_h,
                                absl::StrCat("the shape of input_h ", ShapeStr(input_h))));
  if (f.spec.mode != RnnMode::kLstm) return absl::OkStatus();
  return same_shape("output_c", s[2], "output_c_backprop", s[5], f.c_shape,
                    absl::StrCat("the shape of input_c ", f.c_shape.DebugString()));
}

struct BwdInputs {
  const Tensor *output, *output_h, *output_c, *dy, *dhn, *dcn, *reserve;
};

inline absl::Status ValidateBackward(OpKernelContext* ctx, const FwdInputs& in, BwdInputs* b) {
  TF_RETURN_IF_ERROR(GetInputs(ctx, {{"output", &b->output},
                                     {"output_h", &b->output_h},
                                     {"output_c", &b->output_c},
                                     {"output_backprop", &b->dy},
                                     {"output_h_backprop", &b->dhn},
                                     {"output_c_backprop", &b->dcn},
                                     {"reserve_space", &b->reserve}}));
  return CheckBackwardShapes(ctx->op_kernel().type_string(),
                             {in.spec, in.out_shape, in.c_shape}, in.input_h->shape(),
                             {b->output->shape(), b->output_h->shape(), b->output_c->shape(),
                              b->dy->shape(), b->dhn->shape(), b->dcn->shape()});
}

// What the forward and backward kernels share: the family's attrs and the op version (1-3:
// CudnnRNN(Backprop)[V2|V3]); the devices' computations (see CudnnRnnForwardOp) use its
// output allocation.
class CudnnRnnOpBase : public AttrsOpKernel<CudnnAttrs> {
 public:
  CudnnRnnOpBase(OpKernelConstruction* c, int version)
      : AttrsOpKernel(c), version_(version) {}

  // V3's sequence lengths as the engine's ints (copied into *store), or nullptr.
  static const int* Lengths(const FwdInputs& in, std::vector<int>* store) {
    return SeqLengths(in.lengths, in.spec.B, store);
  }

  // The forward's outputs 0-3 (reserve_space: `reserve` elements when training, else a
  // scalar) and V2/V3's host_reserved (zeros, host memory).
  absl::Status AllocateForward(OpKernelContext* ctx, const FwdInputs& in, int64_t reserve,
                               Tensor** output, Tensor** output_h, Tensor** output_c,
                               Tensor** reserve_space) const {
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 0, in.out_shape, output));
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 1, in.input_h->shape(), output_h));
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 2, in.c_shape, output_c));
    TF_RETURN_IF_ERROR(AllocateOutput(
        ctx, 3, in.spec.training ? TensorShape({reserve}) : TensorShape({}), reserve_space));
    if (version_ >= 2) {
      Tensor* host_reserved;
      const bool pair = version_ == 2 && in.spec.training;
      TF_RETURN_IF_ERROR(AllocateOutput(ctx, 4, pair ? TensorShape({2}) : TensorShape({}),
                                        &host_reserved));
      host_reserved->flat<int8_t>().setZero();
    }
    return absl::OkStatus();
  }

  // The backprop's outputs: the gradients of input, input_h, input_c and params.
  static absl::Status AllocateBackward(OpKernelContext* ctx, const FwdInputs& in, Tensor** dx,
                                       Tensor** dh0, Tensor** dc0, Tensor** dparams) {
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 0, in.input->shape(), dx));
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 1, in.input_h->shape(), dh0));
    TF_RETURN_IF_ERROR(AllocateOutput(ctx, 2, in.input_c->shape(), dc0));
    return AllocateOutput(ctx, 3, in.params->shape(), dparams);
  }

 protected:
  int version_;
};

// The family's kernels over the device's computations Dev<T> (cudnn_rnn_kernels.cc: the CPU
// engine, cudnn_rnn_gpu_kernels.cc: the CUDA engine), which run after the validation:
//   static absl::Status Forward(OpKernelContext*, const CudnnRnnOpBase&, const FwdInputs&);
//   static absl::Status Backward(OpKernelContext*, const CudnnRnnOpBase&, const FwdInputs&,
//                                const BwdInputs&);
// and, for the params conversions, an object per call: absl::Status Init(OpKernelContext*)
// and absl::Status Copy(T* dst, const T* src, int64_t n) (n elements, on the op's device);
// kCountElements: the messages about the weights' sizes name their element counts.

// CudnnRNN, CudnnRNNV2, CudnnRNNV3 (V = 1, 2, 3).
template <template <typename> class Dev, typename T, int V>
class CudnnRnnForwardOp : public CudnnRnnOpBase {
 public:
  explicit CudnnRnnForwardOp(OpKernelConstruction* c) : CudnnRnnOpBase(c, V) {}

  void Compute(OpKernelContext* ctx) override {
    FwdInputs in;
    OP_REQUIRES_OK(ctx, ValidateForward(ctx, attrs_, V >= 3, &in));
    OP_REQUIRES_OK(ctx, Dev<T>::Forward(ctx, *this, in));
  }
};

// CudnnRNNBackprop, CudnnRNNBackpropV2, CudnnRNNBackpropV3 (V = 1, 2, 3).
template <template <typename> class Dev, typename T, int V>
class CudnnRnnBackwardOp : public CudnnRnnOpBase {
 public:
  explicit CudnnRnnBackwardOp(OpKernelConstruction* c) : CudnnRnnOpBase(c, V) {
    attrs_.is_training = true;
  }

  void Compute(OpKernelContext* ctx) override {
    FwdInputs in;
    OP_REQUIRES_OK(ctx, ValidateForward(ctx, attrs_, V >= 3, &in));
    BwdInputs b;
    OP_REQUIRES_OK(ctx, ValidateBackward(ctx, in, &b));
    OP_REQUIRES_OK(ctx, Dev<T>::Backward(ctx, *this, in, b));
  }
};

template <typename S>
class CudnnRnnParamsSizeOp : public AttrsOpKernel<CudnnAttrs> {
 public:
  using AttrsOpKernel::AttrsOpKernel;

  void Compute(OpKernelContext* ctx) override {
    RnnSpec s;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, attrs_, &s));
    const int64_t size = RnnParamsCount(s).value();
    OP_REQUIRES(ctx, size <= static_cast<int64_t>(std::numeric_limits<S>::max()),
                absl::InvalidArgumentError(absl::StrCat(type_string(), ": params size ", size,
                                                        " does not fit in S; use S=int64")));
    Tensor* out;
    OP_REQUIRES_OK(ctx, AllocateOutput(ctx, 0, TensorShape({1}), &out));
    out->flat<S>()(0) = static_cast<S>(size);
  }
};

// Canonical regions of a spec, in the order of docs/SEMANTICS.md §4.2.
struct Region {
  int64_t offset, rows, cols;
};
inline void CanonicalRegions(const RnnSpec& s, std::vector<Region>* weights,
                      std::vector<Region>* biases) {
  const int64_t K = RnnK(s), H = s.H, Hs = RnnHs(s);
  for (int64_t p = 0; p < s.L * s.D; ++p) {
    const RnnParamOffsets o = RnnParamLayout(s, p);
    const int64_t in = RnnInWidth(s, p / s.D);
    for (int64_t k = 0; k < K; ++k) weights->push_back({o.w + k * H * in, H, in});
    for (int64_t k = 0; k < K; ++k) weights->push_back({o.r + k * H * Hs, H, Hs});
    if (s.P > 0) weights->push_back({o.p, s.P, H});
    for (int64_t k = 0; k < K; ++k) biases->push_back({o.bw + k * H, H, 1});
    for (int64_t k = 0; k < K; ++k) biases->push_back({o.br + k * H, H, 1});
  }
}

// Lengths of the canonical lists (what CanonicalRegions lists), without listing them.
inline int64_t NumCanonicalWeights(const RnnSpec& s) {
  return s.L * s.D * (2 * RnnK(s) + (s.P > 0 ? 1 : 0));
}
inline int64_t NumCanonicalBiases(const RnnSpec& s) { return s.L * s.D * 2 * RnnK(s); }

inline absl::Status CheckListLengths(const std::string& op, const CudnnAttrs& at,
                                     const RnnSpec& s, bool v2, int64_t num_weights,
                                     int64_t num_biases, int64_t want_w, int64_t want_b) {
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


// The attrs of ParamsToCanonical(V2) and CanonicalToParams(V2): the family's, and the list
// lengths (num_params, or num_params_weights and num_params_biases: V2).
struct CanonicalAttrs : CudnnAttrs {
  bool v2 = false;
  int num_weights = 0, num_biases = 0;

  absl::Status Read(OpKernelConstruction* c) {
    TF_RETURN_IF_ERROR(CudnnAttrs::Read(c));
    v2 = c->HasAttr("num_params_weights");
    if (!v2) {
      TF_RETURN_IF_ERROR(c->GetAttr("num_params", &num_weights));
      num_biases = num_weights;
      return absl::OkStatus();
    }
    TF_RETURN_IF_ERROR(c->GetAttr("num_params_weights", &num_weights));
    return c->GetAttr("num_params_biases", &num_biases);
  }
};

// ParamsToCanonical: params (shape `params`) of the spec's size, the list lengths, then the
// regions of the num_weights + num_biases outputs.
inline absl::Status ParamsToCanonicalRegions(const std::string& op, const CanonicalAttrs& at,
                                             const RnnSpec& s, const TensorShape& params,
                                             std::vector<Region>* w, std::vector<Region>* b) {
  TF_RETURN_IF_ERROR(CheckRank(op, "params", params, 1, "[params_size]"));
  const int64_t expect = RnnParamsCount(s).value();
  if (params.num_elements() != expect) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": params has ", params.num_elements(),
                                                   " elements, expected ", expect, " for ",
                                                   at.Describe(s)));
  }
  // The list lengths are checked before the regions are listed: num_layers comes from a
  // scalar and may be huge.
  TF_RETURN_IF_ERROR(CheckListLengths(op, at, s, at.v2, at.num_weights, at.num_biases,
                                      NumCanonicalWeights(s), NumCanonicalBiases(s)));
  CanonicalRegions(s, w, b);
  return absl::OkStatus();
}

// CanonicalToParams: the weights' and biases' shapes, each of its region's size
// (`count_elements`: the weights' message names the count).
inline absl::Status CanonicalToParamsRegions(const std::string& op, const CanonicalAttrs& at,
                                             const RnnSpec& s, bool count_elements,
                                             const std::vector<TensorShape>& weights,
                                             const std::vector<TensorShape>& biases,
                                             std::vector<Region>* w, std::vector<Region>* b) {
  TF_RETURN_IF_ERROR(CheckListLengths(op, at, s, at.v2, weights.size(), biases.size(),
                                      NumCanonicalWeights(s), NumCanonicalBiases(s)));
  CanonicalRegions(s, w, b);
  for (size_t k = 0; k < w->size(); ++k) {
    const Region& r = (*w)[k];
    if (weights[k].num_elements() != r.rows * r.cols) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": weights[", k, "] has shape ", ShapeStr(weights[k]), ", expected [", r.rows,
          ", ", r.cols, "]",
          count_elements ? absl::StrCat(" (", r.rows * r.cols, " elements)") : "", " for ",
          at.Describe(s)));
    }
  }
  for (size_t k = 0; k < b->size(); ++k) {
    if (biases[k].num_elements() != (*b)[k].rows) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": biases[", k, "] has shape ",
                                                     ShapeStr(biases[k]), ", expected [",
                                                     (*b)[k].rows, "] for ", at.Describe(s)));
    }
  }
  return absl::OkStatus();
}

// CudnnRNNParamsToCanonical(V2): the params' regions copied into the weights and biases.
template <template <typename> class Dev, typename T>
class ParamsToCanonicalOp : public AttrsOpKernel<CanonicalAttrs> {
 public:
  using AttrsOpKernel::AttrsOpKernel;

  void Compute(OpKernelContext* ctx) override {
    RnnSpec s;
    std::vector<Region> w, b;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, attrs_, &s));
    OP_REQUIRES_OK(ctx, ParamsToCanonicalRegions(type_string(), attrs_, s,
                                                 ctx->input(3).shape(), &w, &b));
    Dev<T> dev;
    OP_REQUIRES_OK(ctx, dev.Init(ctx));
    OpOutputList weights, biases;
    OP_REQUIRES_OK(ctx, ctx->output_list("weights", &weights));
    OP_REQUIRES_OK(ctx, ctx->output_list("biases", &biases));
    const T* src = ctx->input(3).flat<T>().data();
    for (size_t k = 0; k < w.size(); ++k) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, weights.allocate(k, TensorShape({w[k].rows, w[k].cols}), &out));
      OP_REQUIRES_OK(ctx, dev.Copy(out->flat<T>().data(), src + w[k].offset,
                                   w[k].rows * w[k].cols));
    }
    for (size_t k = 0; k < b.size(); ++k) {
      Tensor* out;
      OP_REQUIRES_OK(ctx, biases.allocate(k, TensorShape({b[k].rows}), &out));
      OP_REQUIRES_OK(ctx, dev.Copy(out->flat<T>().data(), src + b[k].offset, b[k].rows));
    }
  }
};

// CudnnRNNCanonicalToParams(V2): the weights and biases copied into the params' regions.
template <template <typename> class Dev, typename T>
class CanonicalToParamsOp : public AttrsOpKernel<CanonicalAttrs> {
 public:
  using AttrsOpKernel::AttrsOpKernel;

  void Compute(OpKernelContext* ctx) override {
    RnnSpec s;
    OpInputList weights, biases;
    std::vector<Region> w, b;
    OP_REQUIRES_OK(ctx, ScalarSpec(ctx, attrs_, &s));
    OP_REQUIRES_OK(ctx, ctx->input_list("weights", &weights));
    OP_REQUIRES_OK(ctx, ctx->input_list("biases", &biases));
    auto shapes = [](const OpInputList& list) {
      std::vector<TensorShape> v;
      for (int k = 0; k < list.size(); ++k) v.push_back(list[k].shape());
      return v;
    };
    OP_REQUIRES_OK(ctx,
                   CanonicalToParamsRegions(type_string(), attrs_, s, Dev<T>::kCountElements,
                                            shapes(weights), shapes(biases), &w, &b));
    Dev<T> dev;
    OP_REQUIRES_OK(ctx, dev.Init(ctx));
    Tensor* params;
    OP_REQUIRES_OK(ctx,
                   AllocateOutput(ctx, 0, TensorShape({RnnParamsCount(s).value()}), &params));
    T* dst = params->flat<T>().data();
    for (size_t k = 0; k < w.size(); ++k) {
      OP_REQUIRES_OK(ctx, dev.Copy(dst + w[k].offset, weights[k].flat<T>().data(),
                                   w[k].rows * w[k].cols));
    }
    for (size_t k = 0; k < b.size(); ++k) {
      OP_REQUIRES_OK(ctx, dev.Copy(dst + b[k].offset, biases[k].flat<T>().data(), b[k].rows));
    }
  }
};

// The family's kernels for type T under PREFIX "CudnnRNN..." on DEVICE over Dev. The HOST_*
// arguments place inputs and outputs (e.g. in host memory): HOST_RESERVED host_reserved,
// HOST_LENGTHS sequence_lengths, HOST_SIZES the size scalars, HOST_PARAMS_SIZE params_size.
#define TFRNN_CUDNN_NAME(PREFIX, NAME, DEVICE, T) \
  Name(PREFIX NAME).Device(DEVICE).TypeConstraint<T>("T")
#define TFRNN_CUDNN_KERNELS(T, PREFIX, DEVICE, Dev, HOST_RESERVED, HOST_LENGTHS, HOST_SIZES,   \
                            HOST_PARAMS_SIZE)                                                 \
  REGISTER_KERNEL_BUILDER(TFRNN_CUDNN_NAME(PREFIX, "CudnnRNN", DEVICE, T),                    \
                          CudnnRnnForwardOp<Dev, T, 1>);                                      \
  REGISTER_KERNEL_BUILDER(TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNV2", DEVICE, T) HOST_RESERVED,    \
                          CudnnRnnForwardOp<Dev, T, 2>);                                      \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNV3", DEVICE, T) HOST_LENGTHS HOST_RESERVED,           \
      CudnnRnnForwardOp<Dev, T, 3>);                                                          \
  REGISTER_KERNEL_BUILDER(TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNBackprop", DEVICE, T),            \
                          CudnnRnnBackwardOp<Dev, T, 1>);                                     \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNBackpropV2", DEVICE, T) HOST_RESERVED,                \
      CudnnRnnBackwardOp<Dev, T, 2>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNBackpropV3", DEVICE, T) HOST_LENGTHS HOST_RESERVED,   \
      CudnnRnnBackwardOp<Dev, T, 3>);                                                         \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNParamsToCanonical", DEVICE, T) HOST_SIZES,            \
      ParamsToCanonicalOp<Dev, T>);                                                           \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNParamsToCanonicalV2", DEVICE, T) HOST_SIZES,          \
      ParamsToCanonicalOp<Dev, T>);                                                           \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNCanonicalToParams", DEVICE, T) HOST_SIZES,            \
      CanonicalToParamsOp<Dev, T>);                                                           \
  REGISTER_KERNEL_BUILDER(                                                                    \
      TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNCanonicalToParamsV2", DEVICE, T) HOST_SIZES,          \
      CanonicalToParamsOp<Dev, T>);                                                           \
  REGISTER_KERNEL_BUILDER(TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNParamsSize", DEVICE, T)           \
                              .TypeConstraint<int32_t>("S") HOST_SIZES HOST_PARAMS_SIZE,      \
                          CudnnRnnParamsSizeOp<int32_t>);                                     \
  REGISTER_KERNEL_BUILDER(TFRNN_CUDNN_NAME(PREFIX, "CudnnRNNParamsSize", DEVICE, T)           \
                              .TypeConstraint<int64_t>("S") HOST_SIZES HOST_PARAMS_SIZE,      \
                          CudnnRnnParamsSizeOp<int64_t>);

}  // namespace cudnn
}  // namespace tfrnn

#endif  // TF_RNN_OPS_CC_KERNELS_CUDNN_RNN_FACE_H_
