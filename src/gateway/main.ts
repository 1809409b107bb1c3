// multienv-gateway: the gateway's entry point (see run.ts).
import { runGateway } from "./run";

void runGateway();
