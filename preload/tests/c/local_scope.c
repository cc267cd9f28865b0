// dlsym(RTLD_DEFAULT, ...) searches the *caller's* scope: called from an object that was
// dlopen'ed with RTLD_LOCAL, it also finds that object's own dependencies, which the global
// scope does not hold. The interposer must not change that.
// Built three ways: -DSCOPE_DEP (the dependency), -DSCOPE_USER (the object that looks the
// symbol up), neither (the program that opens SCOPE_USER with RTLD_LOCAL).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#if defined(SCOPE_DEP)
int gpumon_scope_probe_target(void) { return 42; }
#elif defined(SCOPE_USER)
int scope_probe(void) { return dlsym(RTLD_DEFAULT, "gpumon_scope_probe_target") != NULL; }
#else
int main(int argc, char **argv) {
    void *h = dlopen(argc > 1 ? argv[1] : "libscope_user.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*probe)(void) = (int (*)(void))dlsym(h, "scope_probe");
    if (!probe) {
        fprintf(stderr, "dlsym scope_probe: %s\n", dlerror());
        return 2;
    }
    printf("found=%d\n", probe());
    return 0;
}
#endif
