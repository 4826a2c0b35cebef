// Emulation stand-in for the CUDA toolkit header of this name (see cuda_emu.h).
#include "cc/gpu/emu/cuda_emu.h"
