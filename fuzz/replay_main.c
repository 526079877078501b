/*
 * replay_main.c - runs fuzz_slot.c's LLVMFuzzerTestOneInput over every file
 * of a corpus folder, plus a deterministic sweep of generated inputs, so
 * compilers without libFuzzer (gcc) test the same invariants in ctest.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) {
    fprintf(stderr, "replay: cannot open corpus folder %s\n", dir);
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    uint8_t buf[1 << 16];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    ++n;
  }
  closedir(d);
  return n;
}

int main(int argc, char **argv) {
  int files = argc > 1 ? replay_dir(argv[1]) : 0;
  if (files < 0) return 1;
  /* Deterministic sweep: valid-looking headers with every function id,
   * arg_len around the bounds, every slot size and both ring modes. */
  uint8_t in[1 + 1024];
  uint32_t sweeps = 0, lcg = 12345;
  const uint32_t lens[] = {0, 1, 15, 16, 17, 40, 76, 77, 232, 233, 1000, 1001, 0x7FFFFFFF, 0xFFFFFFFF};
  for (uint32_t opt = 0; opt < 16; ++opt)
    for (uint32_t id = 0; id <= 6; ++id)
      for (size_t li = 0; li < sizeof lens / sizeof lens[0]; ++li) {
        for (size_t i = 0; i < sizeof in; ++i) in[i] = (uint8_t)((lcg = lcg * 1103515245u + 12345u) >> 16);
        uint32_t magic = (id == 6) ? 0x11111111u : 0x43555152u;
        in[0] = (uint8_t)opt;
        memcpy(in + 1, &magic, 4);
        memcpy(in + 5, &id, 4);
        memcpy(in + 9, &lens[li], 4);
        LLVMFuzzerTestOneInput(in, sizeof in);
        LLVMFuzzerTestOneInput(in, 1 + 24 + (lcg % 64)); /* short inputs too */
        sweeps += 2;
      }
  LLVMFuzzerTestOneInput(in, 0);
  LLVMFuzzerTestOneInput(in, 1);
  printf("replay: %d corpus files, %u generated inputs, all invariants held\n", files, sweeps);
  return 0;
}
