/* hello.c: tensors, a matmul on a graph, backward, and the gradient. */
#include <stdio.h>
#include <tfcore/tfcore.h>

#define TRY(call) do { tfc_status s_ = (call); if (s_ != TFC_OK) { \
    fprintf(stderr, "%s: %s\n", tfc_status_name(s_), tfc_last_error()); return 1; } } while (0)

int main(void) {
    float xv[6] = {1, 2, 3, 4, 5, 6}, wv[3] = {0.5f, -1.0f, 2.0f};
    int64_t xd[2] = {2, 3}, wd[2] = {3, 1};
    tfc_graph *g = NULL;
    tfc_tensor *x = NULL, *w = NULL, *y = NULL, *loss = NULL, *gw = NULL;
    TRY(tfc_graph_new(&g));
    TRY(tfc_tensor_from_data(xv, xd, 2, TFC_DTYPE_F32, &x));
    TRY(tfc_tensor_from_data(wv, wd, 2, TFC_DTYPE_F32, &w));
    TRY(tfc_tensor_set_requires_grad(w, 1));
    TRY(tfc_matmul(g, x, w, &y));                /* y = x · w, [2,1] */
    TRY(tfc_sum(g, y, NULL, 0, 0, &loss));       /* loss = Σ y */
    TRY(tfc_graph_backward(g, loss, NULL));      /* d loss / d w = Σ_rows x */
    TRY(tfc_tensor_grad(w, &gw));
    TRY(tfc_tensor_print(y, 0));
    TRY(tfc_tensor_print(gw, 0));
    tfc_tensor_release(gw); tfc_tensor_release(loss); tfc_tensor_release(y);
    tfc_tensor_release(w); tfc_tensor_release(x); tfc_graph_release(g);
    return 0;
}
