// Emulation stand-in for the CUDA toolkit header of this name (see cuda_emu_coop.h).
#include "cc/gpu/emu/cuda_emu_coop.h"
