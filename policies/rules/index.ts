// Every policy of the pack, in the order they are reported.
import type { Rule } from "../rule";
import { awsDescriptionCharset } from "./aws-descriptions";
import { capturesVolumeAccess } from "./captures-volume";
import { captureSidecarPerWebsite } from "./capture-sidecars";
import { computerNetworkIsolation } from "./computer-network";
import { containerPrivileges } from "./container-privileges";
import {
  awsResourceTags,
  ec2IngressClosedToWorld,
  ec2InstanceHardening,
  ec2LifetimeFuse,
  ec2NoOpenEgress,
} from "./ec2";
import { kubernetesNetworkWalls } from "./kubernetes-network";
import { kubernetesServiceExposure } from "./kubernetes-services";
import { siteProxyIsolation } from "./proxy-network";
import { secretsStaySecret } from "./secrets";

export {
  awsDescriptionCharset,
  awsResourceTags,
  capturesVolumeAccess,
  captureSidecarPerWebsite,
  computerNetworkIsolation,
  containerPrivileges,
  ec2NoOpenEgress,
  ec2IngressClosedToWorld,
  ec2InstanceHardening,
  ec2LifetimeFuse,
  kubernetesNetworkWalls,
  kubernetesServiceExposure,
  secretsStaySecret,
  siteProxyIsolation,
};

export const RULES: readonly Rule[] = [
  containerPrivileges,
  capturesVolumeAccess,
  computerNetworkIsolation,
  siteProxyIsolation,
  secretsStaySecret,
  ec2IngressClosedToWorld,
  ec2NoOpenEgress,
  ec2InstanceHardening,
  ec2LifetimeFuse,
  awsDescriptionCharset,
  awsResourceTags,
  captureSidecarPerWebsite,
  kubernetesNetworkWalls,
  kubernetesServiceExposure,
];
