/* Host twins of examples/smollm's kernels (examples/smollm/kernels.h) for the fake driver. */
#ifndef T4A_TOOLS_SMOLLM_HOST_TWINS_H_
#define T4A_TOOLS_SMOLLM_HOST_TWINS_H_

#include "testing/fake_driver/fake_driver.h"

/* Registers every kernel of smol_kernel_source under its name with its parameter list. */
void smol_host_twins_register(t4a_fake *fake);

#endif /* T4A_TOOLS_SMOLLM_HOST_TWINS_H_ */
