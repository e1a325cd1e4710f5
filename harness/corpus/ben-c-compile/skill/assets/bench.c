#include <stdio.h>
#include <time.h>
int main(void) {
    volatile unsigned long s = 0;
    clock_t t = clock();
    for (unsigned long i = 0; i < 20000000UL; i++) s += i ^ (i >> 3);
    printf("%lu %.3f\n", (unsigned long)s, (double)(clock() - t) / CLOCKS_PER_SEC);
    return 0;
}
