import type { Command } from "commander";
import { register as up } from "./up.ts";
import { register as supervisor } from "./supervisor.ts";
import { register as gateway } from "./gateway.ts";
import { register as evaluator } from "./evaluator.ts";
import { register as datagen } from "./datagen.ts";
import { register as submit } from "./submit.ts";
import { register as status } from "./status.ts";
import { register as sim } from "./sim.ts";
import { register as build } from "./build.ts";
import { register as verify } from "./verify.ts";
import { register as tools } from "./tools.ts";

export const commands: Array<(program: Command) => void> = [up, supervisor, gateway, evaluator, datagen, submit, status, sim, build, verify, tools];
