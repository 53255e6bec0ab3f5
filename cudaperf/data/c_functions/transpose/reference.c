#include <stddef.h>

void transpose(int rows, int cols, const float* in, float* out) {
    for (int i = 0; i < rows; ++i)
        for (int j = 0; j < cols; ++j)
            out[(size_t)j * rows + i] = in[(size_t)i * cols + j];
}
