#include <stddef.h>

void mandelbrot(int width, int height, int max_iter, int* iters) {
    const int FRAC = 28;
    const long long FOUR = 4LL << FRAC;
    for (int py = 0; py < height; ++py) {
        /* im = -1.25 + 2.5 * py / height, in fixed point */
        long long ci = -(5LL << (FRAC - 2)) + ((long long)py * (5LL << (FRAC - 1))) / height;
        for (int px = 0; px < width; ++px) {
            /* re = -2 + 2.5 * px / width */
            long long cr = -(2LL << FRAC) + ((long long)px * (5LL << (FRAC - 1))) / width;
            long long zr = 0, zi = 0;
            int k = 0;
            while (k < max_iter) {
                long long zr2 = (zr * zr) >> FRAC;
                long long zi2 = (zi * zi) >> FRAC;
                if (zr2 + zi2 > FOUR) break;
                long long t = zr2 - zi2 + cr;
                zi = ((zr * zi) >> (FRAC - 1)) + ci;
                zr = t;
                ++k;
            }
            iters[(size_t)py * width + px] = k;
        }
    }
}
