/* Where the fetched model is (examples/smollm/fetch_model.py puts it in examples/smollm/model/). */
#ifndef T4A_EXAMPLES_SMOLLM_MODEL_PATH_H_
#define T4A_EXAMPLES_SMOLLM_MODEL_PATH_H_

#include <stddef.h>

#define SMOL_MODEL_NAME "SmolLM2-135M-Instruct.Q4_1.gguf"
#define SMOL_FETCH_COMMAND "python3 examples/smollm/fetch_model.py"

/* $SMOLLM_MODEL if set, else examples/smollm/model/SMOL_MODEL_NAME under the working folder or
 * one of its four parents, first that exists. Returns 1 and the path in buf, or 0 (buf then holds
 * the default relative path). */
int smol_model_path(char *buf, size_t size);

#endif /* T4A_EXAMPLES_SMOLLM_MODEL_PATH_H_ */
