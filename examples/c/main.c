/* Runs examples/resnet_block.mlir, compiled by graphfuse into a shared library, from C,
 * and checks its result against a plain C implementation of the same block.
 *
 *   graphfuse compile examples/resnet_block.mlir -o build/libresnet_block.so
 *   cc -std=c99 -O2 -Ibuild examples/c/main.c -Lbuild -l:libresnet_block.so \
 *      -Wl,-rpath,'$ORIGIN' -lm -o build/resnet_block
 *   build/resnet_block            (or: build/resnet_block <folder> to save the buffers)
 *
 * Prints the largest difference and exits 0 when it is within 1e-3 (relative). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "libresnet_block.h"

#define C 64
#define H 56
#define W 56
#define PLANE (H * W)

static uint32_t seed = 12345u;

/* Uniform in [-scale, scale): a small linear congruential generator, so the inputs are
 * the same on every machine. */
static void fill(float *data, int64_t count, float scale) {
  for (int64_t i = 0; i < count; i++) {
    seed = seed * 1664525u + 1013904223u;
    data[i] = scale * ((float)(seed >> 8) / 8388608.0f - 1.0f);
  }
}

/* 3x3 convolution, padding 1, then the block's batch norm (mean 0.05, variance 1.5);
 * ReLU when `relu`, after adding `residual` when it is not NULL. */
static void conv_bn(const float *in, const float *w, const float *gamma, const float *beta,
                    const float *residual, int relu, float *out) {
  const double scale = 1.0 / sqrt(1.5 + 1e-5);
  for (int o = 0; o < C; o++)
    for (int y = 0; y < H; y++)
      for (int x = 0; x < W; x++) {
        double sum = 0.0;
        for (int i = 0; i < C; i++)
          for (int ky = 0; ky < 3; ky++)
            for (int kx = 0; kx < 3; kx++) {
              int yy = y + ky - 1, xx = x + kx - 1;
              if (yy >= 0 && yy < H && xx >= 0 && xx < W)
                sum += (double)in[i * PLANE + yy * W + xx] * w[((o * C + i) * 3 + ky) * 3 + kx];
            }
        double value = (sum - 0.05) * scale * gamma[o] + beta[o];
        if (residual != NULL)
          value += residual[o * PLANE + y * W + x];
        out[o * PLANE + y * W + x] = (float)(relu && value < 0.0 ? 0.0 : value);
      }
}

static int save(const char *folder, const char *name, const float *data, int64_t count) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.bin", folder, name);
  FILE *file = fopen(path, "wb");
  if (file == NULL || fwrite(data, sizeof *data, (size_t)count, file) != (size_t)count) {
    fprintf(stderr, "cannot write %s\n", path);
    return 1;
  }
  return fclose(file) != 0;
}

int main(int argc, char **argv) {
  if (resnet_block_abi_version() != GRAPHFUSE_ABI_VERSION) {
    fprintf(stderr, "the library was built for another graphfuse C ABI\n");
    return 1;
  }
  /* The arguments, in the order the header lists them; their sizes from its info. */
  const graphfuse_entry_info *info = resnet_block_main_info();
  float *buffers[RESNET_BLOCK_MAIN_NUM_INPUTS + RESNET_BLOCK_MAIN_NUM_OUTPUTS];
  for (int i = 0; i < info->num_inputs + info->num_outputs; i++) {
    const graphfuse_buffer_info *buffer =
        i < info->num_inputs ? &info->inputs[i] : &info->outputs[i - info->num_inputs];
    buffers[i] = malloc((size_t)buffer->bytes);
    if (buffers[i] == NULL)
      return 1;
  }
  float *x = buffers[0], *w1 = buffers[1], *w2 = buffers[2];
  float *gamma1 = buffers[3], *beta1 = buffers[4], *gamma2 = buffers[5], *beta2 = buffers[6];
  float *out = buffers[7];
  fill(x, RESNET_BLOCK_MAIN_IN0_ELEMENTS, 1.0f);
  fill(w1, RESNET_BLOCK_MAIN_IN1_ELEMENTS, 1.0f / 24); /* 1 / sqrt(64 * 3 * 3) */
  fill(w2, RESNET_BLOCK_MAIN_IN2_ELEMENTS, 1.0f / 24);
  fill(gamma1, C, 1.0f);
  fill(beta1, C, 0.5f);
  fill(gamma2, C, 1.0f);
  fill(beta2, C, 0.5f);

  int status = resnet_block_main(x, w1, w2, gamma1, beta1, gamma2, beta2, out);
  if (status != GRAPHFUSE_OK) {
    fprintf(stderr, "resnet_block_main failed: status %d\n", status);
    return 1;
  }

  float *hidden = malloc(sizeof(float) * C * PLANE), *expected = malloc(sizeof(float) * C * PLANE);
  if (hidden == NULL || expected == NULL)
    return 1;
  conv_bn(x, w1, gamma1, beta1, NULL, 1, hidden);
  conv_bn(hidden, w2, gamma2, beta2, x, 1, expected);
  double worst = 0.0;
  for (int64_t i = 0; i < RESNET_BLOCK_MAIN_OUT0_ELEMENTS; i++) {
    double error = fabs((double)out[i] - expected[i]) / (1.0 + fabs((double)expected[i]));
    worst = error > worst ? error : worst;
  }
  printf("%s: %d inputs, output %lldx%lldx%lldx%lld, threads %d, largest difference %.2e\n",
         info->function, info->num_inputs, (long long)info->outputs[0].shape[0],
         (long long)info->outputs[0].shape[1], (long long)info->outputs[0].shape[2],
         (long long)info->outputs[0].shape[3], resnet_block_set_threads(0), worst);

  if (argc > 1) {
    for (int i = 0; i < info->num_inputs; i++)
      if (save(argv[1], info->inputs[i].name, buffers[i], info->inputs[i].elements))
        return 1;
    if (save(argv[1], "out", out, RESNET_BLOCK_MAIN_OUT0_ELEMENTS))
      return 1;
  }
  return worst <= 1e-3 ? 0 : 1;
}
