/* cuda_runtime.h for the SIMT host runs (../simt.h): the kernels' sources include this name. */
#include "simt.h"
