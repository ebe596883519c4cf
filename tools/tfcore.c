/* tfcore: train, sample from and evaluate GPT models; train and use BPE tokenizers. */
#include <string.h>

#include "cli.h"
#include "lora_cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tfcore <command> [flags]   (libtfcore %s)\n"
            "  train      train a GPT on a text file (no flags: char-tiny on tinyshakespeare)\n"
            "  sample     generate text from a checkpoint\n"
            "  chat       a conversation with a model, in its chat template (stdin: one user message a line)\n"
            "  eval       loss of a checkpoint on a text file\n"
            "  tokenizer  train | encode | decode with a BPE tokenizer\n"
            "  lora       merge: fold LoRA adapters into their base model\n"
            "  data       prepare: a text to train.bin / val.bin token files (nanoGPT's u16 or llm.c's shards)\n"
            "  export     a model as a Hugging Face directory or (GPT-2) an llm.c checkpoint\n"
            "Run `tfcore <command> --help` for its flags.\n",
            tfc_version_string());
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
    if (strcmp(cmd, "sample") == 0) return cmd_sample(argc - 2, argv + 2);
    if (strcmp(cmd, "chat") == 0) return cmd_chat(argc - 2, argv + 2);
    if (strcmp(cmd, "eval") == 0) return cmd_eval(argc - 2, argv + 2);
    if (strcmp(cmd, "tokenizer") == 0) return cmd_tokenizer(argc - 2, argv + 2);
    if (strcmp(cmd, "data") == 0) return cmd_data(argc - 2, argv + 2);
    if (strcmp(cmd, "export") == 0) return cmd_export(argc - 2, argv + 2);
    if (strcmp(cmd, "lora") == 0) return cmd_lora(argc - 2, argv + 2);
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("tfcore %s\n", tfc_version_string());
        return 0;
    }
    fprintf(
        stderr,
        "tfcore: error: unknown command '%s' (train, sample, chat, eval, tokenizer, data, export, lora; see tfcore --help)\n",
        cmd);
    return EXIT_USAGE;
}
