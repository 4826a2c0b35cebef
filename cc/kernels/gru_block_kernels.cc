// CPU kernels of the GRU block family: the family's kernels (gru_block_face.h: validation,
// outputs) over the CPU engine's GRU cell.
#include <initializer_list>

#include "cc/kernels/engine_loader.h"
#include "cc/kernels/gru_block_face.h"
#include "cc/kernels/kernel_util.h"
#include "tensorflow/core/framework/op_kernel.h"

namespace tfrnn {
namespace gru_block {
namespace {

// The operands the forward (GruCellFwdArgs) and the backward (GruCellBwdArgs) both read.
template <typename T, typename Args>
void SetSharedOperands(ComputeBridge<T>& br, const GruInputs& in, Args* a) {
  a->B = in.B;
  a->I = in.I;
  a->H = in.H;
  br.BindIn(SharedInputs(in, a));
}

// The family's computations on the CPU engine (see gru_block_face.h).
template <typename T>
struct CpuGru {
  using A = typename ComputeType<T>::type;

  static absl::Status Forward(OpKernelContext* ctx, const GruInputs& in, Tensor* outs[4]) {
    ComputeBridge<T> br(ctx);
    GruCellFwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    br.BindIn({{&a.b_ru, in.b_ru}, {&a.b_c, in.b_c}});
    br.BindOut({&a.r, &a.u, &a.c, &a.h}, outs);
    A* ws = br.Scratch(GruCellFwdWorkspaceSize(in.B, in.H));
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::GruForward(engine)(pool, a, ws);
    });
  }

  static absl::Status Backward(OpKernelContext* ctx, const GruInputs& in, bool exact,
                               Tensor* outs[4]) {
    ComputeBridge<T> br(ctx);
    GruCellBwdArgs<A> a;
    SetSharedOperands(br, in, &a);
    br.BindIn(GradInputs(in, exact, &a));
    br.BindOut({&a.d_x, &a.d_h_prev, &a.d_c_bar, &a.d_r_bar_u_bar}, outs);
    A* ws = br.Scratch(GruCellBwdWorkspaceSize(in.B, in.H));
    return RunEngine(ctx, br, [&](const EngineApi& engine, TfHostPool& pool) {
      EngineFns<A>::GruBackward(engine)(pool, a, ws);
    });
  }

  static absl::Status Zero(OpKernelContext*, std::initializer_list<Tensor*> outs) {
    SetZero<T>(outs);
    return absl::OkStatus();
  }
};

#define TFRNN_REGISTER_GRU_KERNELS(T) TFRNN_GRU_BLOCK_KERNELS(T, DEVICE_CPU, CpuGru)
TFRNN_FOR_EACH_TYPE(TFRNN_REGISTER_GRU_KERNELS)
#undef TFRNN_REGISTER_GRU_KERNELS

}  // namespace
}  // namespace gru_block
}  // namespace tfrnn
