#include <stdlib.h>
#include <string.h>

void jacobi2d(int rows, int cols, int iters, float* grid) {
    if (rows < 3 || cols < 3 || iters <= 0) return;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float* tmp = (float*)malloc(bytes);
    memcpy(tmp, grid, bytes); /* borders */
    float* a = grid;
    float* b = tmp;
    for (int it = 0; it < iters; ++it) {
        for (int i = 1; i < rows - 1; ++i) {
            for (int j = 1; j < cols - 1; ++j) {
                size_t c = (size_t)i * cols + j;
                b[c] = 0.25f * (a[c - cols] + a[c + cols] + a[c - 1] + a[c + 1]);
            }
        }
        float* t = a; a = b; b = t;
    }
    if (a != grid) memcpy(grid, a, bytes);
    free(tmp);
}
