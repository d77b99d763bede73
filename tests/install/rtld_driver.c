/* Loads an MPI plugin (rtld_plugin.c) with dlopen(RTLD_LOCAL) and runs it:
 * the driver itself knows nothing of MPI. */
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    int (*run)(void) = (int (*)(void))dlsym(h, "plugin_run");
    return run();
}
